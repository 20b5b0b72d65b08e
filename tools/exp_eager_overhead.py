import sys, time, statistics, torch
sys.path.insert(0, '.')
import reference
dev = sys.argv[1] if len(sys.argv) > 1 else 'cpu'
m = reference.Model(784, 256, 32).to(dev).eval(); x = torch.rand(128, 784, device=dev)
sync = torch.cuda.synchronize if dev == 'cuda' else (lambda: None)
def t(n=2000):
    ts = []
    with torch.no_grad():
        for _ in range(50): m(x)
        sync()
        for _ in range(n):
            t0 = time.perf_counter_ns(); m(x); sync(); ts.append((time.perf_counter_ns() - t0) / 1e3)
    return round(statistics.median(ts), 1)
print('before dynamo', t(), t())
import torch._dynamo
print('after dynamo', t(), t())
