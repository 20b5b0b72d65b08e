"""Types of the VAE ELBO problem (GPU MODE format): what generate_input makes and custom_kernel returns."""
from typing import Dict, Tuple, TypedDict, TypeVar

import torch

# (x (B, 784) float32 in [0, 1], eps (B, 32) float32 N(0, 1), weights by reference.Model's state_dict names)
input_t = TypeVar("input_t", bound=Tuple[torch.Tensor, torch.Tensor, Dict[str, torch.Tensor]])
# (elbo, recon_loss, kl_div), each (B,) float32
output_t = TypeVar("output_t", bound=Tuple[torch.Tensor, torch.Tensor, torch.Tensor])


class TestSpec(TypedDict):
    batchsize: int  # no underscore: eval.py (pmpp_v2, nvidia) parses test keys as [a-zA-Z]+
    seed: int
