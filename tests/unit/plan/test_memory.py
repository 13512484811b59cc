"""Memory per GPU against Korthikanti et al.'s activation formulas and a hand-computed case."""

from __future__ import annotations

import pytest

from stallscope.plan import Model, Strategy, load_model, load_stack
from stallscope.plan._memory import GIB, layer_activation_bytes, memory

# Korthikanti et al. (2022) measure with fp16 activations, unfused attention and dropout
KORTHIKANTI = {"flash_attention": False, "dropout": True}


def _m(**kw: object) -> Model:
    base = {"layers": 96, "hidden": 12288, "heads": 96, "seq_len": 2048, "vocab": 51200}
    return load_model(base | KORTHIKANTI | kw)


@pytest.mark.parametrize("t", [1, 2, 8])
def test_activations_match_korthikanti(t: int) -> None:
    m = _m()
    s, b, h, a = m.seq_len, 2, m.hidden, m.heads
    st = Strategy(tp=t, micro_batch=b, global_batch=b)
    sbh = s * b * h
    # table 2 of the paper: no parallelism; tensor parallel; + sequence parallel; + selective
    assert layer_activation_bytes(m, st) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    if t > 1:
        sp = st.with_(sequence_parallel=True)
        assert layer_activation_bytes(m, sp) == pytest.approx(sbh / t * (34 + 5 * a * s / h))
        sel = sp.with_(recompute="selective")
        assert layer_activation_bytes(m, sel) == pytest.approx(sbh / t * 34)
        assert layer_activation_bytes(m, sp.with_(recompute="full")) == pytest.approx(2 * sbh / t)
    else:
        assert layer_activation_bytes(m, st) == pytest.approx(sbh * (34 + 5 * a * s / h))
        assert layer_activation_bytes(m, st.with_(recompute="full")) == pytest.approx(2 * sbh)


def test_flash_attention_drops_the_score_term() -> None:
    m = _m(flash_attention=True)
    st = Strategy(tp=8, micro_batch=1, global_batch=1, sequence_parallel=True)
    sbh = m.seq_len * m.hidden
    lse = 4 * m.heads * m.seq_len / 8
    assert layer_activation_bytes(m, st) == pytest.approx(sbh / 8 * 34 + lse)


def test_fp8_keeps_its_gemm_inputs_in_one_byte() -> None:
    """FP8 training saves the QKV, projection, FFN-up and FFN-down inputs quantized (one byte a
    value): 2 sbh (the two norms' outputs, / t with sequence parallelism) + sbh / t (the
    projection's input) + sbf / t (the FFN-down input) fewer bytes than 16-bit training."""
    m = _m(flash_attention=True, dropout=False)
    t, sbh, f = 8, m.seq_len * m.hidden, m.ffn_hidden
    for sp in (False, True):
        st = Strategy(tp=t, micro_batch=1, global_batch=1, sequence_parallel=sp)
        saved = 2 * sbh / (t if sp else 1) + sbh / t + m.seq_len * f / t
        bf16 = layer_activation_bytes(m, st)
        fp8 = layer_activation_bytes(m, st.with_(precision="fp8"))
        assert bf16 - fp8 == pytest.approx(saved)
    full = Strategy(tp=t, micro_batch=1, global_batch=1, recompute="full")
    assert layer_activation_bytes(m, full.with_(precision="fp8")) == layer_activation_bytes(m, full)


def test_hand_computed_small_case() -> None:
    # 4 layers, h = 1024, 16 heads, s = 512, V = 1000, f = 4096, no dropout, flash, tied;
    # tp=2, pp=2, dp=2, micro-batch 2, 8 micro-batches, ZeRO-1, no recompute.
    m = load_model({"layers": 4, "hidden": 1024, "heads": 16, "seq_len": 512, "vocab": 1000})
    st = Strategy(tp=2, pp=2, dp=2, micro_batch=2, global_batch=32, zero=1)
    layer = 4 * 1024 * 1024 + 2 * 1024 * 4096 + 4 * 1024  # attention + FFN + norms
    stage0 = 2 * layer / 2 + 1000 * 1024 / 2  # two layers and the embedding, half each (tp)
    sb = 512 * 2
    act = 8 * sb * 1024 + (8 * 1024 * sb + 4 * sb * 4096) / 2 + 4 * 16 * sb / 2
    mem = memory(m, st, 80 * GIB, in_flight=[2, 1])
    assert mem.stage == 0
    assert mem.weights == pytest.approx(stage0 * 2)
    assert mem.gradients == pytest.approx(stage0 * 2)
    assert mem.optimizer == pytest.approx(stage0 * 12 / 2)
    assert mem.activations == pytest.approx(2 * 2 * act + 2 * 2 * sb * 1024)
    held = stage0 * (2 + 2 + 6) + mem.activations
    assert mem.total == pytest.approx(held * 1.05 + GIB)
    assert mem.fits


@pytest.mark.parametrize(
    ("stack", "tp", "per_logit"),
    [
        ("megatron-core", 1, 6),  # vocab-parallel cross-entropy: one fp32 copy, in place
        ("megatron-core", 2, 6),
        ("torchtitan-2024", 1, 12),  # eager F.cross_entropy on logits.float()
        ("torchtitan-2024", 2, 16),  # the same under DTensor's loss_parallel
        ("llm-foundry-2023", 1, 4),  # FlashAttention's fused cross-entropy: 16-bit throughout
        ({"preset": "torchtitan-2024", "loss_bytes": 4, "loss_saved_bytes": 2}, 1, 4),
    ],
)
def test_the_last_stage_holds_its_stacks_loss_peak(
    stack: str | dict[str, object], tp: int, per_logit: float
) -> None:
    m = load_model({"layers": 4, "hidden": 1024, "heads": 16, "seq_len": 512, "vocab": 1000})
    st = Strategy(tp=tp, micro_batch=2, global_batch=2, stack=load_stack(stack))
    logits = 2 * 512 * 1000 / tp  # a micro-batch's tokens x the vocabulary, split over tp
    assert memory(m, st, 80 * GIB, [1]).logits == pytest.approx(per_logit * logits)


def test_eager_elementwise_and_repeated_kv_keep_more() -> None:
    """PyTorch's eager RMSNorm keeps the fp32 copy it normalizes and its 16-bit result before
    the weight (4 bytes a value more than a fused norm, two norms), the eager SwiGLU the SiLU
    output (2 bytes x the FFN width); K and V repeated to the query heads keep the query width
    (bench/activation_memory.py measures the three)."""
    m = load_model({"layers": 2, "hidden": 1024, "heads": 16, "kv_heads": 4, "seq_len": 512,
                    "vocab": 1000, "ffn_hidden": 3584, "gated_ffn": True})  # fmt: skip
    sb, h, f, q, kv = 2 * 512, 1024, 3584, 1024, 256

    def kept(t: int = 1, sp: bool = False, **stack: object) -> float:
        st = Strategy(tp=t, sequence_parallel=sp, micro_batch=2, global_batch=2,
                      stack=load_stack({"preset": "megatron-core", **stack}))  # fmt: skip
        return layer_activation_bytes(m, st)

    fused = kept()
    assert kept(elementwise="eager") - fused == pytest.approx(8 * sb * h + 2 * sb * f)
    assert kept(gqa_repeat=True) - fused == pytest.approx(4 * sb * (q - kv))
    # split as the values they add: the norms' by sequence parallelism, the rest by tp
    extra = kept(4, True, elementwise="eager", gqa_repeat=True) - kept(4, True)
    assert extra == pytest.approx(8 * sb * h / 4 + (2 * sb * f + 4 * sb * (q - kv)) / 4)


def test_zero_stages_shard_optimizer_then_gradients_then_weights(gpt3: Model) -> None:
    st = Strategy(tp=8, pp=1, dp=8, micro_batch=1, global_batch=8)
    m0, m1, m2, m3 = (memory(gpt3, st.with_(zero=z), 80 * GIB, [1]) for z in range(4))
    assert m1.optimizer == pytest.approx(m0.optimizer / 8)
    assert m2.gradients == pytest.approx(m0.gradients / 8) and m1.gradients == m0.gradients
    assert m3.weights < m0.weights / 4 and m2.weights == m0.weights


def test_zero3_holds_the_gathered_layers_and_the_roots_embedding_and_output() -> None:
    """Fully sharded, a GPU holds its shard of the 16-bit weights, the gathered layer in use
    and the one prefetched, and the embedding and output layer its root module gathered for
    the whole forward and backward (PyTorch FSDP does not reshard the root after forward)."""
    base = {"layers": 4, "hidden": 1024, "heads": 16, "seq_len": 512, "vocab": 32000}
    for tied, ends in ((False, 2), (True, 1)):
        m = load_model(base | {"tied_embeddings": tied})
        st = Strategy(dp=8, micro_batch=1, global_batch=8, zero=3)
        emb, layer = m.embedding_params(), m.dense_layer_params()
        total = 4 * layer + ends * emb
        got = memory(m, st, 80 * GIB, [1]).weights
        assert got == pytest.approx(2 * total / 8 + 2 * 2 * layer + 2 * ends * emb)


def test_a_configuration_that_does_not_fit_says_what_and_by_how_much(gpt3: Model) -> None:
    st = Strategy(tp=8, pp=1, dp=1, micro_batch=1, global_batch=1)
    mem = memory(gpt3, st, 80 * GIB, [1])
    assert not mem.fits
    msg = mem.shortfall()
    assert "GiB over" in msg and "optimizer" in msg and "weights" in msg
    over = (mem.total - mem.capacity) / GIB
    assert f"{over:.1f} GiB over" in msg


def test_the_most_loaded_stage_is_found_among_all(gpt3: Model) -> None:
    from stallscope.plan._schedule import in_flight_counts

    for st in (
        Strategy(tp=8, pp=8, dp=1, micro_batch=1, global_batch=64, recompute="full"),
        Strategy(tp=8, pp=4, dp=1, micro_batch=2, global_batch=8, interleave=3),
        Strategy(tp=8, pp=12, dp=1, micro_batch=1, global_batch=4),
        Strategy(tp=4, pp=6, dp=2, micro_batch=1, global_batch=48, zero=3),
    ):
        fl = in_flight_counts(st.pp, st.micro_batches, st.interleave)
        assert memory(gpt3, st, 80 * GIB, fl) == memory(gpt3, st, 80 * GIB, fl, every_stage=True)
    # a stage in the middle that holds more than the first is looked at too
    st = Strategy(tp=8, pp=4, dp=1, micro_batch=1, global_batch=8)
    odd = [1, 6, 2, 1]
    assert memory(gpt3, st, 80 * GIB, odd).stage == 1
    assert memory(gpt3, st, 80 * GIB, odd) == memory(gpt3, st, 80 * GIB, odd, every_stage=True)
