"""CPU-sized model families for the training workloads: the demo's MLP (any depth and width),
a ResNet-like CNN (any number of residual blocks, with or without batch norm and skip
connections, as Stash varies ResNets to change layers and gradients) and a tiny next-token
model. torch is imported by the builders, never at import."""

from __future__ import annotations

from typing import Any

MODELS = ("mlp", "cnn", "lm")


def mlp(depth: int = 3, width: int = 512, inputs: int = 3 * 32 * 32, classes: int = 10) -> Any:
    """The demo's classifier: Flatten, Linear(inputs, width), ReLU, then depth - 1 times
    Linear(width, width), ReLU, and Linear(width, classes): depth + 1 linear layers."""
    from torch import nn

    if depth < 1 or width < 1:
        raise ValueError(f"an MLP needs depth >= 1 and width >= 1, got {depth} and {width}")
    layers: list[Any] = [nn.Flatten(), nn.Linear(inputs, width), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, classes))
    return nn.Sequential(*layers)


def cnn(
    blocks: int = 3,
    width: int = 16,
    classes: int = 10,
    batch_norm: bool = True,
    residual: bool = True,
) -> Any:
    """A ResNet-like CNN for 3-channel images: a 3x3 stem, `blocks` basic blocks (two 3x3
    convolutions each; the channels double and the side halves at blocks 2 and 4), global
    average pooling, a linear classifier."""
    import torch
    from torch import nn

    if blocks < 1 or width < 1:
        raise ValueError(f"a CNN needs blocks >= 1 and width >= 1, got {blocks} and {width}")

    def norm(c: int) -> Any:
        return nn.BatchNorm2d(c) if batch_norm else nn.Identity()

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(cin, cout, 3, stride, 1, bias=not batch_norm),
                norm(cout),
                nn.ReLU(),
                nn.Conv2d(cout, cout, 3, 1, 1, bias=not batch_norm),
                norm(cout),
            )
            self.skip: Any = None
            if residual:
                self.skip = (
                    nn.Identity()
                    if stride == 1 and cin == cout
                    else nn.Conv2d(cin, cout, 1, stride, bias=False)
                )

        def forward(self, x: Any) -> Any:
            y = self.body(x)
            if self.skip is not None:
                y = y + self.skip(x)
            return torch.relu(y)

    layers: list[Any] = [nn.Conv2d(3, width, 3, 1, 1, bias=False), norm(width), nn.ReLU()]
    c = width
    for b in range(blocks):
        down = b in (1, 3)
        layers.append(Block(c, c * 2 if down else c, 2 if down else 1))
        c = c * 2 if down else c
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, classes)]
    return nn.Sequential(*layers)


def lm(vocab: int = 4096, dim: int = 128, depth: int = 2) -> Any:
    """A tiny next-token model: an embedding, `depth` position-wise MLP blocks with residual
    connections, and the output projection to `vocab` logits per position."""
    from torch import nn

    class Residual(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mlp = nn.Sequential(
                nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)
            )

        def forward(self, x: Any) -> Any:
            return x + self.mlp(x)

    return nn.Sequential(
        nn.Embedding(vocab, dim),
        *(Residual() for _ in range(depth)),
        nn.LayerNorm(dim),
        nn.Linear(dim, vocab),
    )


def layer_count(model: Any) -> int:
    """Layers with parameters (Linear, Conv, norm, Embedding modules that own parameters)."""
    return sum(1 for m in model.modules() if any(True for _ in m.parameters(recurse=False)))


def gradient_bytes(model: Any) -> int:
    """Bytes of the gradients DDP all-reduces: every parameter that requires a gradient."""
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
