// Writes a tiny, deterministic llama-architecture GGUF (v3, all F32, ~3.8 MB) that real llama.cpp runtimes load.
// Whatever the prompt, the model answers exactly TINY_REPLY (6 tokens), then EOS: tests can assert exact text,
// token counts, stream chunks and finish reasons. No dependencies; the output is byte-identical on every run.
//
// How: attention and FFN weights are zero, so the last hidden state is the (one-hot) embedding of the last token;
// output.weight is a bigram table (logit 80): any non-reply token -> "Hello", each reply token -> the next,
// "▁model." -> </s>. Every other token sits e^-80 below, so no sampler setting can change the answer.
//
//   node test/support/local-model/tiny-gguf.ts [out.gguf]     prints the path, size and sha256
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';

export const TINY_REPLY = 'Hello from the tracegate test model.';
export const TINY_REPLY_DELTAS = ['Hello', ' from', ' the', ' tracegate', ' test', ' model.'];
/** completion tokens of a full answer as the servers count them: the 6 reply tokens plus the EOS that ends it */
export const TINY_COMPLETION_TOKENS = 7;

const N_EMBD = 384; // >= vocab size, so every token gets its own one-hot embedding
const N_FF = 64;
const N_HEAD = 4;
const CTX = 2048;
const LOGIT = 80;
const ALIGN = 32;

// Vocabulary: SentencePiece-style ("llama" tokenizer) with byte fallback so any UTF-8 input tokenizes.
const TYPE = { normal: 1, unknown: 2, control: 3, byte: 6 }; // llama.cpp's token types
const vocab: [text: string, type: number][] = [['<unk>', TYPE.unknown]];
for (const t of ['<s>', '</s>', '<|system|>', '<|user|>', '<|assistant|>', '<|end|>']) vocab.push([t, TYPE.control]);
for (let b = 0; b < 256; b++) vocab.push([`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`, TYPE.byte]);
vocab.push(['\u2581', TYPE.normal]); // "▁", SentencePiece's space
for (let c = 33; c <= 126; c++) vocab.push([String.fromCharCode(c), TYPE.normal]);
const REPLY_FIRST = vocab.length;
for (const d of TINY_REPLY_DELTAS) vocab.push([d.replace(/^ /, '\u2581'), TYPE.normal]);
const N_VOCAB = vocab.length; // 364
const EOS = 2;

const CHAT_TEMPLATE =
  "{% for m in messages %}{{ '<|' + m['role'] + '|>' + m['content'] + '<|end|>' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}";

// Tensors: [name, ggml shape (ne0 first), fill]. ggml stores a matmul weight [n_in, n_out] as n_out rows of n_in.
function tensors(): [string, number[], Float32Array][] {
  const embd = new Float32Array(N_EMBD * N_VOCAB);
  for (let t = 0; t < N_VOCAB; t++) embd[t * N_EMBD + t] = 1;
  // after RMS norm a one-hot vector has sqrt(N_EMBD) in its slot; output_norm scales it back to 1
  const outNorm = new Float32Array(N_EMBD).fill(1 / Math.sqrt(N_EMBD));
  const out = new Float32Array(N_EMBD * N_VOCAB); // row = next token, column = current token
  for (let cur = 0; cur < N_VOCAB; cur++) {
    const r = cur - REPLY_FIRST;
    const next = r < 0 ? REPLY_FIRST : r < TINY_REPLY_DELTAS.length - 1 ? cur + 1 : EOS;
    out[next * N_EMBD + cur] = LOGIT;
  }
  const zeros = (n: number) => new Float32Array(n);
  const ones = (n: number) => new Float32Array(n).fill(1);
  return [
    ['token_embd.weight', [N_EMBD, N_VOCAB], embd],
    ['output_norm.weight', [N_EMBD], outNorm],
    ['output.weight', [N_EMBD, N_VOCAB], out],
    ['blk.0.attn_norm.weight', [N_EMBD], ones(N_EMBD)],
    ['blk.0.attn_q.weight', [N_EMBD, N_EMBD], zeros(N_EMBD * N_EMBD)],
    ['blk.0.attn_k.weight', [N_EMBD, N_EMBD], zeros(N_EMBD * N_EMBD)],
    ['blk.0.attn_v.weight', [N_EMBD, N_EMBD], zeros(N_EMBD * N_EMBD)],
    ['blk.0.attn_output.weight', [N_EMBD, N_EMBD], zeros(N_EMBD * N_EMBD)],
    ['blk.0.ffn_norm.weight', [N_EMBD], ones(N_EMBD)],
    ['blk.0.ffn_gate.weight', [N_EMBD, N_FF], zeros(N_EMBD * N_FF)],
    ['blk.0.ffn_up.weight', [N_EMBD, N_FF], zeros(N_EMBD * N_FF)],
    ['blk.0.ffn_down.weight', [N_FF, N_EMBD], zeros(N_FF * N_EMBD)],
  ];
}

// GGUF encoding, little-endian (typed arrays are, on x86 and arm): scalars; metadata values as (type id, payload).
const u32 = (v: number) => Buffer.from(new Uint32Array([v]).buffer);
const u64 = (v: number) => Buffer.from(new BigUint64Array([BigInt(v)]).buffer);
const str = (s: string) => Buffer.concat([u64(Buffer.byteLength(s)), Buffer.from(s, 'utf8')]);
const U32 = (v: number) => Buffer.concat([u32(4), u32(v)]);
const F32 = (v: number) => Buffer.concat([u32(6), Buffer.from(new Float32Array([v]).buffer)]);
const BOOL = (v: boolean) => Buffer.concat([u32(7), Buffer.from([v ? 1 : 0])]);
const STR = (v: string) => Buffer.concat([u32(8), str(v)]);
const STRS = (v: string[]) => Buffer.concat([u32(9), u32(8), u64(v.length), ...v.map(str)]);
const F32S = (v: number[]) => Buffer.concat([u32(9), u32(6), u64(v.length), Buffer.from(new Float32Array(v).buffer)]);
const I32S = (v: number[]) => Buffer.concat([u32(9), u32(5), u64(v.length), Buffer.from(new Int32Array(v).buffer)]);
const align = (n: number) => Math.ceil(n / ALIGN) * ALIGN;

export function tinyGguf(): Buffer {
  const meta: [string, Buffer][] = [
    ['general.architecture', STR('llama')],
    ['general.name', STR('tracegate-tiny')],
    ['general.alignment', U32(ALIGN)],
    ['general.file_type', U32(0)], // all F32
    ['llama.context_length', U32(CTX)],
    ['llama.embedding_length', U32(N_EMBD)],
    ['llama.block_count', U32(1)],
    ['llama.feed_forward_length', U32(N_FF)],
    ['llama.attention.head_count', U32(N_HEAD)],
    ['llama.attention.head_count_kv', U32(N_HEAD)],
    ['llama.attention.layer_norm_rms_epsilon', F32(1e-5)],
    ['llama.rope.dimension_count', U32(N_EMBD / N_HEAD)],
    ['llama.vocab_size', U32(N_VOCAB)],
    ['tokenizer.ggml.model', STR('llama')],
    ['tokenizer.ggml.tokens', STRS(vocab.map(([text]) => text))],
    ['tokenizer.ggml.scores', F32S(vocab.map(() => 0))],
    ['tokenizer.ggml.token_type', I32S(vocab.map(([, type]) => type))],
    ['tokenizer.ggml.unknown_token_id', U32(0)],
    ['tokenizer.ggml.bos_token_id', U32(1)],
    ['tokenizer.ggml.eos_token_id', U32(EOS)],
    ['tokenizer.ggml.add_bos_token', BOOL(true)],
    ['tokenizer.ggml.add_eos_token', BOOL(false)],
    ['tokenizer.chat_template', STR(CHAT_TEMPLATE)],
  ];
  const ts = tensors();
  const head: Buffer[] = [Buffer.from('GGUF'), u32(3), u64(ts.length), u64(meta.length)];
  for (const [key, value] of meta) head.push(str(key), value);
  let offset = 0; // tensor infos: name, dims, type (0 = F32), offset in the aligned data section
  for (const [name, shape, data] of ts) {
    head.push(str(name), u32(shape.length), ...shape.map(u64), u32(0), u64(offset));
    offset += align(data.byteLength);
  }
  const header = Buffer.concat(head);
  const file = Buffer.alloc(align(header.length) + offset); // zero-filled, so padding is zeros
  header.copy(file);
  offset = align(header.length);
  for (const [, , data] of ts) {
    file.set(new Uint8Array(data.buffer), offset);
    offset += align(data.byteLength);
  }
  return file;
}

export function writeTinyGguf(path: string): { path: string; bytes: number; sha256: string } {
  const buf = tinyGguf();
  writeFileSync(path, buf);
  return { path, bytes: buf.length, sha256: createHash('sha256').update(buf).digest('hex') };
}

if (import.meta.main) {
  const r = writeTinyGguf(process.argv[2] ?? 'tiny.gguf');
  console.log(`${r.path} ${r.bytes} bytes sha256 ${r.sha256}`);
}
