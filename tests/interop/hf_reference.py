"""The Python side of mpt's Hugging Face interop tests (tests/interop/test_transformers.cpp and
test_tokenizers.cpp), run with the torch environment's transformers, tokenizers and safetensors.

  hidden MODEL_DIR IO TOL   BertModel.from_pretrained(MODEL_DIR) on IO's input_ids (attention mask: id != 0);
                            the largest |difference| from IO's mpt hidden states at the unmasked positions, as a
                            fraction of their largest magnitude; exits 1 above TOL
  mlm MODEL_DIR IO TOL      BertForMaskedLM.from_pretrained(MODEL_DIR) (an mpt export) against IO's mpt logits
  wordpiece VOCAB CASES     BertWordPieceTokenizer(VOCAB, lowercase) on each text of CASES (JSON: [{text, ids}]),
                            without special tokens; exits 1 if any differs from mpt's ids, naming the first ones
  autotokenizer DIR CASES   the same with AutoTokenizer.from_pretrained(DIR) (an mpt export)
  fill-mask DIR TEXT        pipeline("fill-mask", DIR) on TEXT; prints its answers as JSON
  text-classification DIR TEXT
                            pipeline("text-classification", DIR) on TEXT; prints its answer as JSON
"""
import json
import sys

import safetensors.torch
import torch


def relative_difference(mine, reference, keep):
    mine, reference = mine[keep].float(), reference[keep].float()
    return ((mine - reference).abs().max() / reference.abs().max()).item()


def compare_model(kind, model_dir, io_path, tolerance):
    import transformers
    io = safetensors.torch.load_file(io_path)
    ids = io["input_ids"].long()
    mask = (ids != 0).long()
    if kind == "hidden":
        model = transformers.BertModel.from_pretrained(model_dir, attn_implementation="eager")
        expected_name = "hidden"
    else:
        model = transformers.BertForMaskedLM.from_pretrained(model_dir, attn_implementation="eager")
        expected_name = "logits"
    model.eval()
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask)
    reference = out.last_hidden_state if kind == "hidden" else out.logits
    difference = relative_difference(io[expected_name], reference, mask.bool())
    print(f"{kind}: {model_dir}: max |mpt - transformers| / max |transformers| = {difference:.3g} "
          f"(tolerance {tolerance})")
    return 0 if difference <= tolerance else 1


def compare_wordpiece(vocab, cases_path, from_folder=False):
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    if from_folder:
        import transformers
        tokenizer = transformers.AutoTokenizer.from_pretrained(vocab)
        encoded = tokenizer([case["text"] for case in cases], add_special_tokens=False)["input_ids"]
        name = f"AutoTokenizer ({type(tokenizer).__name__}, {len(tokenizer)} tokens)"
    else:
        from tokenizers import BertWordPieceTokenizer
        tokenizer = BertWordPieceTokenizer(vocab, lowercase=True, strip_accents=True, clean_text=True,
                                           handle_chinese_chars=True)
        encoded = [tokenizer.encode(case["text"], add_special_tokens=False).ids for case in cases]
        name = "tokenizers' BertWordPieceTokenizer"
    wrong = []
    for case, expected in zip(cases, encoded):
        if expected != case["ids"]:
            wrong.append((case["text"], case["ids"], expected))
    print(f"wordpiece: {len(cases)} texts, {len(wrong)} differ from {name}")
    for text, mine, expected in wrong[:5]:
        print(f"  {text!r}\n    mpt:        {mine}\n    tokenizers: {expected}")
    return 0 if not wrong else 1


def main():
    torch.set_num_threads(1)
    mode = sys.argv[1]
    if mode in ("hidden", "mlm"):
        return compare_model(mode, sys.argv[2], sys.argv[3], float(sys.argv[4]))
    if mode in ("wordpiece", "autotokenizer"):
        return compare_wordpiece(sys.argv[2], sys.argv[3], from_folder=mode == "autotokenizer")
    if mode in ("fill-mask", "text-classification"):
        import transformers
        answer = transformers.pipeline(mode, model=sys.argv[2], device="cpu")(sys.argv[3])
        print(json.dumps({"answer": answer}))
        return 0
    print(f"unknown mode {mode}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
