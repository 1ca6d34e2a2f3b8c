"""The reference solutions of ``course_lib.prompt_tuning`` (see :mod:`course_lib.solutions`): each function here is
the body of the same-named one there, which keeps the signature and the docstring. An edition without this
lesson's solutions released leaves this file out."""
from __future__ import annotations

import torch
from torch import nn


def prepend_soft_prompt(input_embeds: torch.Tensor, attention_mask: torch.Tensor,
                        prompt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    B = input_embeds.shape[0]
    P = prompt.shape[0]
    prompt_b = prompt.to(input_embeds.dtype).unsqueeze(0).expand(B, P, prompt.shape[-1])  # (B, P, d)
    embeds = torch.cat([prompt_b, input_embeds], dim=1)  # (B, P + T, d)
    ones = torch.ones(B, P, dtype=attention_mask.dtype, device=attention_mask.device)
    return embeds, torch.cat([ones, attention_mask], dim=1)


def answer_only_labels(input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_len: int,
                       answer_start: torch.Tensor) -> torch.Tensor:
    B, T = input_ids.shape
    pos = torch.arange(T, device=input_ids.device).unsqueeze(0)  # (1, T)
    keep = (pos >= answer_start.to(input_ids.device).view(B, 1)) & attention_mask.bool()  # (B, T)
    labels = torch.where(keep, input_ids.long(), torch.full_like(input_ids, -100, dtype=torch.long))
    prefix = torch.full((B, prompt_len), -100, dtype=torch.long, device=input_ids.device)
    return torch.cat([prefix, labels], dim=1)


def option_log_likelihood(logits: torch.Tensor, labels: torch.Tensor, normalise: bool = False) -> torch.Tensor:
    logp = torch.log_softmax(logits[:, :-1], dim=-1)  # (B, L-1, V): predictions for positions 1..L-1
    target = labels[:, 1:]  # (B, L-1)
    scored = target != -100  # -100: not part of the option
    picked = logp.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # (B, L-1)
    total = (picked * scored).sum(dim=-1)
    if normalise:
        total = total / scored.sum(dim=-1).clamp(min=1)
    return total


def freeze_model(model: nn.Module) -> int:
    total = 0
    for p in model.parameters():  # parameters() yields a shared tensor once
        p.requires_grad_(False)
        total += p.numel()
    model.eval()
    return total
