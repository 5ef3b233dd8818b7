"""Writes a tiny llama-architecture GGUF model with random weights.

The llama.cpp fleet tests need real compute and a real prefix cache, not
text quality: a few layers of small width, a SentencePiece-style vocabulary
of printable ASCII plus the 256 byte-fallback tokens (so every string
tokenizes, about one token per character), and a ChatML chat template so
/v1/chat/completions works. Weights come from a fixed seed, so the same
arguments always give the same file.

With --pooling (mean, cls or last) the file states that pooling type, which
makes it an embedding model: llama-server started with --embeddings serves
/v1/embeddings with it, one vector per input.

Usage: python tinymodel.py OUT.gguf [--layers N] [--embd N] [--ff N] [--heads N] [--ctx N] [--pooling P]
"""

import argparse
import sys

import gguf
import numpy as np

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def vocabulary():
    """Tokens, scores and types: control tokens, printable ASCII pieces, bytes."""
    tokens = [b"<unk>", b"<s>", b"</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    # SentencePiece writes a space as U+2581; give it and every printable
    # ASCII character a piece of its own so text costs one token a character.
    pieces = ["\u2581"] + [chr(c) for c in range(33, 127)]
    for p in pieces:
        tokens.append(p.encode("utf-8"))
        types.append(gguf.TokenType.NORMAL)
    for b in range(256):
        tokens.append(("<0x%02X>" % b).encode("ascii"))
        types.append(gguf.TokenType.BYTE)
    scores = [0.0] * len(tokens)
    return tokens, scores, types


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--embd", type=int, default=256)
    ap.add_argument("--ff", type=int, default=768)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pooling", choices=["mean", "cls", "last"])
    a = ap.parse_args(argv)
    if a.embd % a.heads:
        ap.error(f"--embd {a.embd} is not a multiple of --heads {a.heads}")

    tokens, scores, types = vocabulary()
    rng = np.random.default_rng(a.seed)

    def rand(*shape):
        # Small weights keep activations finite through the layers.
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("prefixgate-tiny-llama")
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.embd)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.ff)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.heads)
    w.add_rope_dimension_count(a.embd // a.heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_chat_template(CHATML)
    if a.pooling:
        w.add_pooling_type(gguf.PoolingType[a.pooling.upper()])

    n_vocab = len(tokens)
    # numpy shapes are ggml's dimensions reversed: (rows=out, cols=in).
    w.add_tensor("token_embd.weight", rand(n_vocab, a.embd))
    w.add_tensor("output_norm.weight", np.ones(a.embd, dtype=np.float32))
    w.add_tensor("output.weight", rand(n_vocab, a.embd))
    for i in range(a.layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(a.embd, dtype=np.float32))
        for t in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(p + t + ".weight", rand(a.embd, a.embd))
        w.add_tensor(p + "ffn_norm.weight", np.ones(a.embd, dtype=np.float32))
        w.add_tensor(p + "ffn_gate.weight", rand(a.ff, a.embd))
        w.add_tensor(p + "ffn_up.weight", rand(a.ff, a.embd))
        w.add_tensor(p + "ffn_down.weight", rand(a.embd, a.ff))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main(sys.argv[1:])
