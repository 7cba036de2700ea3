"""The Python side of tests/interop/test_torchao_mx.cpp: torchao's MX reference (prototype.mx_formats, FLOOR
scaling, E4M3 elements, blocks of 32) on the operands mpt wrote. Prints JSON: each operand's scale bytes and E4M3
data bytes from to_mx, and the FP32 bit patterns of a (M, K) @ b (N, K)^T over the dequantized operands."""
import json
import sys

import torch
from torchao.prototype.mx_formats.config import ScaleCalculationMode
from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx

torch.set_num_threads(1)
folder, m, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
a = torch.frombuffer(bytearray(open(f"{folder}/a.f32", "rb").read()), dtype=torch.float32).reshape(m, k)
b = torch.frombuffer(bytearray(open(f"{folder}/b.f32", "rb").read()), dtype=torch.float32).reshape(n, k)
out = {}
dequantized = {}
for name, x in (("a", a), ("b", b)):
    scale, data = to_mx(x, torch.float8_e4m3fn, 32, ScaleCalculationMode.FLOOR)
    out[f"{name}_scales"] = scale.view(torch.uint8).flatten().tolist()
    out[f"{name}_data"] = data.view(torch.uint8).flatten().tolist()
    dequantized[name] = to_dtype(data, scale, torch.float8_e4m3fn, 32, torch.float32)
product = torch.mm(dequantized["a"], dequantized["b"].t())
out["mm_bits"] = product.view(torch.int32).flatten().tolist()
print(json.dumps(out))
