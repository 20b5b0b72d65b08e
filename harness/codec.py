"""Messages between the harness and its worker, without pickle.

The worker runs untrusted solution code, so the harness never unpickles what it sends:
a message is a JSON header plus raw tensor bytes. Tensors may appear anywhere inside
lists, tuples and dicts (dict keys are strings); they arrive as CPU tensors.
"""
import json
import struct

import torch

_DTYPES = {str(d): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
    torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128)}


def _flatten(obj, blobs):
    if isinstance(obj, torch.Tensor):
        t = obj.detach().to("cpu").contiguous()
        if str(t.dtype) not in _DTYPES:
            raise TypeError(f"codec cannot carry a tensor of dtype {t.dtype}")
        blobs.append(t.view(torch.uint8).reshape(-1).numpy().tobytes() if t.numel() else b"")
        return {"__tensor__": len(blobs) - 1, "dtype": str(t.dtype), "shape": list(t.shape)}
    if isinstance(obj, dict):
        return {"__dict__": {str(k): _flatten(v, blobs) for k, v in obj.items()}}
    if isinstance(obj, tuple):
        return {"__tuple__": [_flatten(v, blobs) for v in obj]}
    if isinstance(obj, list):
        return [_flatten(v, blobs) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"codec cannot carry an object of type {type(obj).__name__}")


def _rebuild(obj, blobs):
    if isinstance(obj, list):
        return [_rebuild(v, blobs) for v in obj]
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            dtype = _DTYPES[obj["dtype"]]
            raw = blobs[obj["__tensor__"]]
            flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
            return flat.view(dtype).reshape(obj["shape"]) if raw else torch.empty(obj["shape"], dtype=dtype)
        if "__tuple__" in obj:
            return tuple(_rebuild(v, blobs) for v in obj["__tuple__"])
        if "__dict__" in obj:
            return {k: _rebuild(v, blobs) for k, v in obj["__dict__"].items()}
    return obj


def encode(obj) -> bytes:
    blobs = []
    header = json.dumps({"body": _flatten(obj, blobs), "sizes": [len(b) for b in blobs]}).encode()
    return struct.pack("<Q", len(header)) + header + b"".join(blobs)


def decode(data: bytes):
    if len(data) < 8:
        raise ValueError("truncated message")
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode())
    blobs, pos = [], 8 + n
    for size in header["sizes"]:
        blobs.append(data[pos:pos + size])
        pos += size
    if pos != len(data):
        raise ValueError("message length does not match its header")
    return _rebuild(header["body"], blobs)
