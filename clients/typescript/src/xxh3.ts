// XXH3-64 with seed 0 and the default secret, written out with BigInt so
// that every SDK computes the router's routing key without native code. It
// covers every length class of the algorithm: 0, 1-3, 4-8, 9-16, 17-128,
// 129-240 and the striped long path.

const M64 = (1n << 64n) - 1n;
const P32_1 = 0x9e3779b1n;
const P32_2 = 0x85ebca77n;
const P32_3 = 0xc2b2ae3dn;
const P64_1 = 0x9e3779b185ebca87n;
const P64_2 = 0xc2b2ae3d27d4eb4fn;
const P64_3 = 0x165667b19e3779f9n;
const P64_4 = 0x85ebca77c2b2ae63n;
const P64_5 = 0x27d4eb2f165667c5n;
const PMX1 = 0x165667919e3779f9n;
const PMX2 = 0x9fb21c651e98df25n;

// The default 192-byte secret of the XXH3 specification.
const SECRET = new Uint8Array([
  0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
  0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
  0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
  0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
  0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
  0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
  0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
  0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
  0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
  0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
  0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
  0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
]);
const SECRET_VIEW = new DataView(SECRET.buffer);
const STRIPE_LEN = 64;
const SECRET_CONSUME_RATE = 8;
const ACC_NB = 8;

function u64(x: bigint): bigint {
  return x & M64;
}

function mul(a: bigint, b: bigint): bigint {
  return (a * b) & M64;
}

function rotl(x: bigint, r: bigint): bigint {
  return ((x << r) | (x >> (64n - r))) & M64;
}

function swap64(x: bigint): bigint {
  let out = 0n;
  for (let i = 0n; i < 8n; i++) {
    out = (out << 8n) | ((x >> (8n * i)) & 0xffn);
  }
  return out;
}

function fold(a: bigint, b: bigint): bigint {
  const p = a * b; // exact 128-bit product
  return (p & M64) ^ (p >> 64n);
}

function avalanche64(h: bigint): bigint {
  h ^= h >> 33n;
  h = mul(h, P64_2);
  h ^= h >> 29n;
  h = mul(h, P64_3);
  return h ^ (h >> 32n);
}

function avalanche3(h: bigint): bigint {
  h ^= h >> 37n;
  h = mul(h, PMX1);
  return h ^ (h >> 32n);
}

function rrmxmx(h: bigint, len: number): bigint {
  h ^= rotl(h, 49n) ^ rotl(h, 24n);
  h = mul(h, PMX2);
  h ^= (h >> 35n) + BigInt(len);
  h = mul(h, PMX2);
  return h ^ (h >> 28n);
}

class Input {
  private readonly view: DataView;
  constructor(readonly b: Uint8Array) {
    this.view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  }
  u32(i: number): bigint {
    return BigInt(this.view.getUint32(i, true));
  }
  u64(i: number): bigint {
    return this.view.getBigUint64(i, true);
  }
}

function sec32(i: number): bigint {
  return BigInt(SECRET_VIEW.getUint32(i, true));
}

function sec64(i: number): bigint {
  return SECRET_VIEW.getBigUint64(i, true);
}

function mix16(inp: Input, i: number, s: number): bigint {
  return fold(inp.u64(i) ^ sec64(s), inp.u64(i + 8) ^ sec64(s + 8));
}

function accumulate512(acc: bigint[], inp: Input, i: number, s: number): void {
  for (let j = 0; j < ACC_NB; j++) {
    const v = inp.u64(i + 8 * j);
    const k = v ^ sec64(s + 8 * j);
    acc[j ^ 1] = u64(acc[j ^ 1]! + v);
    acc[j] = u64(acc[j]! + (k & 0xffffffffn) * (k >> 32n));
  }
}

function scramble(acc: bigint[], s: number): void {
  for (let j = 0; j < ACC_NB; j++) {
    let a = acc[j]!;
    a ^= a >> 47n;
    a ^= sec64(s + 8 * j);
    acc[j] = mul(a, P32_1);
  }
}

function hashLong(inp: Input, len: number): bigint {
  const acc = [P32_3, P64_1, P64_2, P64_3, P64_4, P32_2, P64_5, P32_1];
  const stripesPerBlock = (SECRET.length - STRIPE_LEN) / SECRET_CONSUME_RATE;
  const blockLen = STRIPE_LEN * stripesPerBlock;
  const blocks = Math.floor((len - 1) / blockLen);
  for (let n = 0; n < blocks; n++) {
    for (let s = 0; s < stripesPerBlock; s++) {
      accumulate512(acc, inp, n * blockLen + s * STRIPE_LEN, s * SECRET_CONSUME_RATE);
    }
    scramble(acc, SECRET.length - STRIPE_LEN);
  }
  const stripes = Math.floor((len - 1 - blockLen * blocks) / STRIPE_LEN);
  for (let s = 0; s < stripes; s++) {
    accumulate512(acc, inp, blocks * blockLen + s * STRIPE_LEN, s * SECRET_CONSUME_RATE);
  }
  accumulate512(acc, inp, len - STRIPE_LEN, SECRET.length - STRIPE_LEN - 7);
  let r = mul(BigInt(len), P64_1);
  for (let j = 0; j < 4; j++) {
    r = u64(r + fold(acc[2 * j]! ^ sec64(11 + 16 * j), acc[2 * j + 1]! ^ sec64(11 + 16 * j + 8)));
  }
  return avalanche3(r);
}

/** XXH3-64 of data with seed 0, as an unsigned 64-bit bigint. */
export function xxh3(data: Uint8Array): bigint {
  const len = data.length;
  const inp = new Input(data);
  if (len === 0) {
    return avalanche64(sec64(56) ^ sec64(64));
  }
  if (len <= 3) {
    const c1 = data[0]!;
    const c2 = data[len >> 1]!;
    const c3 = data[len - 1]!;
    const combined = BigInt(((c1 << 16) | (c2 << 24) | c3 | (len << 8)) >>> 0);
    return avalanche64(combined ^ (sec32(0) ^ sec32(4)));
  }
  if (len <= 8) {
    const in64 = u64(inp.u32(len - 4) + (inp.u32(0) << 32n));
    return rrmxmx(in64 ^ (sec64(8) ^ sec64(16)), len);
  }
  if (len <= 16) {
    const lo = inp.u64(0) ^ (sec64(24) ^ sec64(32));
    const hi = inp.u64(len - 8) ^ (sec64(40) ^ sec64(48));
    return avalanche3(u64(BigInt(len) + swap64(lo) + hi + fold(lo, hi)));
  }
  if (len <= 128) {
    let acc = mul(BigInt(len), P64_1);
    if (len > 32) {
      if (len > 64) {
        if (len > 96) {
          acc += mix16(inp, 48, 96) + mix16(inp, len - 64, 112);
        }
        acc += mix16(inp, 32, 64) + mix16(inp, len - 48, 80);
      }
      acc += mix16(inp, 16, 32) + mix16(inp, len - 32, 48);
    }
    acc += mix16(inp, 0, 0) + mix16(inp, len - 16, 16);
    return avalanche3(u64(acc));
  }
  if (len <= 240) {
    let acc = mul(BigInt(len), P64_1);
    for (let i = 0; i < 8; i++) {
      acc += mix16(inp, 16 * i, 16 * i);
    }
    acc = avalanche3(u64(acc));
    const rounds = Math.floor(len / 16);
    for (let i = 8; i < rounds; i++) {
      acc += mix16(inp, 16 * i, 16 * (i - 8) + 3);
    }
    acc += mix16(inp, len - 16, 136 - 17);
    return avalanche3(u64(acc));
  }
  return hashLong(inp, len);
}
