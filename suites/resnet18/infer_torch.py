"""ResNet18 inference in PyTorch (`mode=infer`): the shared initial weights in evaluation mode under
`torch.inference_mode`, eager or `torch.compile` (`variant=compiled`), through runtime/inference.py.

Every request's images are on the device before its clock starts (a server's input tensor is ready
when the model is called); the clock holds the normalisation, the network and the synchronisation.
"""

from __future__ import annotations

from typing import Any

from suites.resnet18 import common
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import torch

    from suites.resnet18.models_torch import ResNet18, load_weights, make_prepare
    from suites.runtime import training_torch

    images, _ = common.load(ctx)
    dev = ctx.device
    model = ResNet18()
    load_weights(model, common.init_weights(int(ctx.params["seed"])))
    model = model.to(dev).eval()  # BatchNorm on its running statistics (the initial mean 0, variance 1)
    prepare = make_prepare(dev)
    compiled = ctx.params["variant"] == "compiled"
    forward = torch.compile(model) if compiled else model
    ctx.note("pytorch inference: " + ("torch.compile of the model (inductor)" if compiled else "eager")
             + ", torch.inference_mode, evaluation mode")  # fmt: skip

    def nchw(a: Any) -> Any:
        return torch.from_numpy(a).permute(0, 3, 1, 2).contiguous().to(dev)

    def request(batch: int) -> Any:
        x = nchw(common.inference_images(images, batch))

        def call() -> Any:
            with torch.inference_mode(), training_torch.autocast(ctx):
                return forward(prepare(x))

        return call

    with torch.inference_mode():  # the agreement check: float32, eager, whatever --precision and variant
        outputs = model(prepare(nchw(common.probe_batch(images))))
    ctx.check("infer_outputs", [float(v) for v in outputs.float().cpu().tolist()])
    common.infer(ctx, request, "no gradients")
