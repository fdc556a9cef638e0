"""EAST against cross-entropy in a whole training step: forward + loss + backward + AdamW step.

For each configuration two copies of one freshly initialised model (same weights), each with its own AdamW, train
on one fixed random batch: one with EAST (the Trainer's path, ``EASTLoss.loss_from_statistics`` of
``EASTLoss.statistics`` without the host-side label check, defaults: macro F1, T = 0.2), one with cross-entropy
(``F.cross_entropy`` of the float32 logits, the cheapest baseline; EASTTrainer's ``east_loss="ce"`` set loss adds label
validation). Timing (``benchmarks/timing.py``): after a warm-up, each repeat times a block of EAST steps and a block of
CE steps back to back, in an order that alternates between repeats, so both see the same machine load; the table gives
median ms per step and the median over repeats of the per-repeat ratio EAST / CE (and of the difference EAST - CE).
With ``--dtype bf16`` / ``fp16`` forward and loss run under autocast (the surrogate itself is float32). On CUDA also
the peak memory of one step above the model, optimiser state and batch.

Configurations (the paper's batch sizes): the tabular MLP (512-256-128, dropout 0.25, 64 features) at batch 512 with
2 classes and at batch 128 with 10 classes; ``darknet19_tiny`` on 32 px at batch 128 with 10 and 100 classes; on CUDA
also ``darknet19`` on 32 px at batch 128 (CIFAR-10, CIFAR-100) and on 224 px at batch 64 with 256 classes
(Caltech-256). Name others with ``--configs``. Text (a ``BertForSequenceClassification`` built from its config, random
weights, no download, on random token ids of a fixed length, no padding): ``text_tiny`` (east_hf's from-scratch model:
hidden 64, 2 layers, 2 heads, a 4,000-token vocabulary) and ``bert_base`` (BERT-base's config: hidden 768, 12 layers,
12 heads, 30,522 tokens), at sequence length 128 (the ``size`` column).

Usage::

    python benchmarks/step_speed.py --device cpu --threads 1 --repeats 15 --json step_speed_cpu.json
    python benchmarks/step_speed.py --device cuda --dtype bf16 --json step_speed_cuda_bf16.json
    python benchmarks/step_speed.py --device cpu --quick        # every code path in seconds (a smoke test)
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import platform
import time

import torch
import torch.nn.functional as F
from timing import CLOCK_HELP, CLOCKS, against, check_clock, median_ms, peak_bytes, time_interleaved

import east_hf.hf.models  # noqa: F401  (registers darknet19 / darknet19_tiny with timm)
from east_hf import EASTLoss

# name: (model, batch, classes, image size or feature count)
CONFIGS = {
    "mlp_b512_c2": ("tabular_mlp", 512, 2, 64),
    "mlp_b128_c10": ("tabular_mlp", 128, 10, 64),
    "mlp_b512_c100": ("tabular_mlp", 512, 100, 64),
    "mlp_b512_c1000": ("tabular_mlp", 512, 1000, 64),
    "tiny32_b128_c10": ("darknet19_tiny", 128, 10, 32),
    "tiny32_b128_c100": ("darknet19_tiny", 128, 100, 32),
    "dn19_32_b128_c10": ("darknet19", 128, 10, 32),
    "dn19_32_b128_c100": ("darknet19", 128, 100, 32),
    "dn19_224_b64_c256": ("darknet19", 64, 256, 224),
    "text_tiny_b32_s128_c2": ("text_tiny", 32, 2, 128),
    "text_tiny_b32_s128_c8": ("text_tiny", 32, 8, 128),
    "bert_base_b32_s128_c2": ("bert_base", 32, 2, 128),
    "bert_base_b8_s128_c2": ("bert_base", 8, 2, 128),
}
TEXT_MODELS = ("text_tiny", "bert_base")  # named with --configs only
DEFAULT_CONFIGS = {
    "cpu": ["mlp_b512_c2", "mlp_b128_c10", "mlp_b512_c100", "mlp_b512_c1000", "tiny32_b128_c10", "tiny32_b128_c100"],
    "cuda": [name for name, spec in CONFIGS.items() if spec[0] not in TEXT_MODELS],
}
QUICK_CONFIGS = {  # the same code paths, small: a smoke test of the script
    "mlp_b64_c2": ("tabular_mlp", 64, 2, 16),
    "tiny32_b16_c10": ("darknet19_tiny", 16, 10, 32),
}
DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def machine_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(device: str) -> dict:
    env = {
        "device": device,
        "machine": machine_name(device),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
    }
    if device == "cuda":
        env["cuda"] = torch.version.cuda
        env["cudnn"] = torch.backends.cudnn.version()
        env["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    return env


def build(kind: str, batch: int, classes: int, size: int, device: str, seed: int = 0):
    """(model, forward(model) -> logits, labels) for one configuration, on ``device``, in train mode."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    labels = torch.randint(0, classes, (batch,), generator=gen).to(device)
    if kind == "tabular_mlp":
        from east_hf.hf.models import TabularMLPConfig, TabularMLPForClassification

        model = TabularMLPForClassification(TabularMLPConfig(num_features=size, num_labels=classes))
        x = torch.randn(batch, size, generator=gen).to(device)

        def forward(m):
            return m(input_features=x).logits

    elif kind in TEXT_MODELS:
        model = _text_model(kind, classes)
        ids = torch.randint(5, model.config.vocab_size, (batch, size), generator=gen).to(device)
        mask = torch.ones_like(ids)

        def forward(m):
            return m(input_ids=ids, attention_mask=mask).logits

    else:
        import timm

        model = timm.create_model(kind, num_classes=classes)
        x = torch.randn(batch, 3, size, size, generator=gen).to(device)

        def forward(m):
            return m(x)

    return model.to(device).train(), forward, labels


def _text_model(kind: str, classes: int):
    """A randomly initialised BertForSequenceClassification: east_hf's text_tiny, or BERT-base's config."""
    id2label = {i: str(i) for i in range(classes)}
    if kind == "text_tiny":
        from east_hf.hf.models.text import text_tiny_model

        class _Vocabulary:  # what text_tiny_model reads of its tokenizer: the vocabulary size and the pad token
            pad_token_id = 0

            def __len__(self):
                return 4000  # train_wordpiece_tokenizer's default vocab_size

        return text_tiny_model(_Vocabulary(), id2label, max_length=128)
    from transformers import BertConfig, BertForSequenceClassification

    return BertForSequenceClassification(BertConfig(num_labels=classes, id2label=id2label))


def east_loss_fn(classes: int):
    east = EASTLoss(num_classes=classes)

    def loss(logits, labels):  # what EASTTrainer computes (statistics, then the loss; forward adds a finiteness check)
        return east.loss_from_statistics(east.statistics(logits, labels, validate_args=False))

    return loss


def ce_loss_fn(classes: int):
    def loss(logits, labels):  # plain cross-entropy (the Trainer's CE set loss also validates the labels)
        return F.cross_entropy(logits.float(), labels)

    return loss


def make_train_step(model, forward, labels, loss_fn, device: str, amp_dtype, lr: float = 1e-3):
    opt = torch.optim.AdamW(model.parameters(), lr=lr)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=amp_dtype) if amp_dtype is not None else contextlib.nullcontext():
            logits = forward(model)
            loss = loss_fn(logits, labels)
        loss.backward()
        opt.step()

    return step


def peak_step_bytes(step, device: str) -> int | None:
    """Peak bytes allocated during one step above what was allocated before it (CUDA only)."""
    return peak_bytes(step, device) if device == "cuda" else None


def run_config(name: str, spec, device: str, dtype: str, repeats: int, target_ms: float, clock: str = "wall") -> dict:
    kind, batch, classes, size = spec
    model, forward, labels = build(kind, batch, classes, size, device)
    amp_dtype = DTYPES[dtype]
    steps = {
        "east": make_train_step(model, forward, labels, east_loss_fn(classes), device, amp_dtype),
        "ce": make_train_step(copy.deepcopy(model), forward, labels, ce_loss_fn(classes), device, amp_dtype),
    }
    times = time_interleaved(steps, repeats, device, target_ms, warmup=3, clock=clock)
    row = {
        "config": name,
        "model": kind,
        "batch": batch,
        "classes": classes,
        "size": size,
        "dtype": dtype,
        "params": sum(p.numel() for p in model.parameters()),
        "east_ms": median_ms(times, "east"),
        "ce_ms": median_ms(times, "ce"),
        **against(times, "east", "ce"),  # ratio, ratio_min, ratio_max, diff_ms
        "east_peak_bytes": peak_step_bytes(steps["east"], device),
        "ce_peak_bytes": peak_step_bytes(steps["ce"], device),
        "repeats": repeats,
        "calls_per_block": times["calls_per_block"],
        "east_ms_all": times["east"],
        "ce_ms_all": times["ce"],
    }
    del steps, model
    if device == "cuda":
        torch.cuda.empty_cache()
    return row


def _mib(nbytes) -> str:
    return "-" if nbytes is None else f"{nbytes / 2**20:,.1f}"


def markdown(rows: list[dict]) -> str:
    lines = [
        "| config | model | batch | C | input | dtype | EAST ms | CE ms | EAST / CE (min-max) | EAST - CE ms "
        "| peak MiB EAST / CE |",
        "|:---|:---|---:|---:|---:|:---|---:|---:|:---|---:|---:|",
    ]
    for r in rows:
        unit = {"tabular_mlp": "feat", **dict.fromkeys(TEXT_MODELS, "tok")}.get(r["model"], "px")
        size = f"{r['size']} {unit}"
        lines.append(
            f"| {r['config']} | {r['model']} | {r['batch']} | {r['classes']} | {size} | {r['dtype']} | "
            f"{r['east_ms']:.3f} | {r['ce_ms']:.3f} | {r['ratio']:.3f} ({r['ratio_min']:.2f}-{r['ratio_max']:.2f}) | "
            f"{r['diff_ms']:.3f} | {_mib(r['east_peak_bytes'])} / {_mib(r['ce_peak_bytes'])} |"
        )
    return "\n".join(lines)


def header(env: dict, args) -> str:
    return (
        f"torch {env['torch']}, {env['device']} ({env['machine']}), {env['threads']} threads, dtype {args.dtype}, "
        f"{args.repeats} interleaved repeats, blocks of ~{args.block_ms:g} ms"
    )


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="fp32", help="autocast dtype (fp32: none)")
    parser.add_argument("--configs", default=None, help=f"comma-separated, from {sorted(CONFIGS)}")
    parser.add_argument("--repeats", type=int, default=15, help="interleaved EAST/CE blocks per configuration")
    parser.add_argument("--block-ms", type=float, default=100.0, help="approximate length of one timed block")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall", help=CLOCK_HELP)
    parser.add_argument("--quick", action="store_true", help="tiny configurations, 3 repeats: a smoke test")
    parser.add_argument("--json", default=None, help="write the rows, with every timing, to this file")
    parser.add_argument("--markdown", default=None, help="write the table to this file")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("Expected a CUDA device for --device cuda, found none")
    if args.threads:
        torch.set_num_threads(args.threads)
    check_clock(args.clock, args.device)
    if args.quick:
        configs = dict(QUICK_CONFIGS)
        args.repeats, args.block_ms = 3, 5.0
    else:
        names = args.configs.split(",") if args.configs else DEFAULT_CONFIGS[args.device]
        unknown = [n for n in names if n not in CONFIGS]
        if unknown:
            raise SystemExit(f"Unknown configs {unknown}; choose from {sorted(CONFIGS)}")
        configs = {n: CONFIGS[n] for n in names}
    env = environment(args.device)
    print(header(env, args), flush=True)
    rows = []
    for name, spec in configs.items():
        start = time.perf_counter()
        rows.append(run_config(name, spec, args.device, args.dtype, args.repeats, args.block_ms, args.clock))
        r = rows[-1]
        print(
            f"  {name}: EAST {r['east_ms']:.3f} ms, CE {r['ce_ms']:.3f} ms, EAST/CE {r['ratio']:.3f} "
            f"({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
        if args.json:  # after every configuration: partial results survive a time limit
            with open(args.json, "w") as f:
                json.dump({"env": env, "args": vars(args), "rows": rows}, f, indent=1)
    table = markdown(rows)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(f"{header(env, args)}\n\n{table}\n")
    return rows


if __name__ == "__main__":
    main()
