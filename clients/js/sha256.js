// SHA-256: SubtleCrypto's for a whole Blob or a part, and a small
// incremental one of our own for a file sent in parts, whose whole-file
// digest SubtleCrypto cannot compute in pieces.

import { throwIfAborted } from "./errors.js";

// The whole-file hash yields to the page after each step of this many
// bytes.
const HASH_STEP = 1 << 20;

function hex(buf) {
  return Array.from(new Uint8Array(buf), (x) => x.toString(16).padStart(2, "0")).join("");
}

// hasDigest tells whether SubtleCrypto is here (secure contexts only:
// https, localhost, 127.0.0.1).
export function hasDigest() {
  return typeof crypto !== "undefined" && crypto.subtle && typeof crypto.subtle.digest === "function";
}

// sha256Hex is blob's SHA-256 in hex (read whole into memory).
export async function sha256Hex(blob) {
  return hex(await crypto.subtle.digest("SHA-256", await blob.arrayBuffer()));
}

// SHA-256 round constants (FIPS 180-4).
const K256 = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

// Sha256 hashes a stream of bytes a chunk at a time: SubtleCrypto has no
// incremental digest, and a file sent in parts is never held whole, so
// its whole-file SHA-256 is computed here, from the same reads that
// SubtleCrypto hashes part by part. About 50-100 MB/s.
export class Sha256 {
  constructor() {
    this.h = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
    this.w = new Int32Array(64);
    this.buf = new Uint8Array(64);
    this.n = 0; // bytes waiting in buf
    this.len = 0; // bytes hashed
  }

  block(b, o) {
    const w = this.w;
    const h = this.h;
    for (let i = 0; i < 16; i++, o += 4) w[i] = (b[o] << 24) | (b[o + 1] << 16) | (b[o + 2] << 8) | b[o + 3];
    for (let i = 16; i < 64; i++) {
      const x = w[i - 15];
      const y = w[i - 2];
      const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
      const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
      w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
    }
    let a = h[0];
    let b1 = h[1];
    let c = h[2];
    let d = h[3];
    let e = h[4];
    let f = h[5];
    let g = h[6];
    let k = h[7];
    for (let i = 0; i < 64; i++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const t1 = (k + S1 + ((e & f) ^ (~e & g)) + K256[i] + w[i]) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const t2 = (S0 + ((a & b1) ^ (a & c) ^ (b1 & c))) | 0;
      k = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b1;
      b1 = a;
      a = (t1 + t2) | 0;
    }
    h[0] += a;
    h[1] += b1;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
  }

  update(b) {
    let i = 0;
    this.len += b.length;
    if (this.n > 0) {
      while (this.n < 64 && i < b.length) this.buf[this.n++] = b[i++];
      if (this.n < 64) return;
      this.block(this.buf, 0);
      this.n = 0;
    }
    for (; i + 64 <= b.length; i += 64) this.block(b, i);
    while (i < b.length) this.buf[this.n++] = b[i++];
  }

  hex() {
    const pad = new Uint8Array((this.n < 56 ? 56 : 120) - this.n + 8);
    const bits = this.len * 8;
    const v = new DataView(pad.buffer);
    pad[0] = 0x80;
    v.setUint32(pad.length - 8, Math.floor(bits / 2 ** 32));
    v.setUint32(pad.length - 4, bits >>> 0);
    this.update(pad);
    return Array.from(this.h, (x) => (x >>> 0).toString(16).padStart(8, "0")).join("");
  }
}

// yieldToPage lets the page run between steps of a long computation
// (a message, not a timer: background tabs throttle timers).
function yieldToPage() {
  if (typeof MessageChannel === "undefined") return Promise.resolve();
  return new Promise((resolve) => {
    const c = new MessageChannel();
    c.port1.onmessage = () => {
      c.port1.close();
      resolve();
    };
    c.port2.postMessage(null);
  });
}

// hashParts reads f one part of partBytes at a time (the only memory it
// holds) and returns each part's SHA-256 (SubtleCrypto) and the whole
// file's (Sha256, from the same reads), in hex.
export async function hashParts(op, f, partBytes, signal) {
  const whole = new Sha256();
  const parts = [];
  for (let start = 0; start < f.size; start += partBytes) {
    throwIfAborted(op, signal);
    const buf = await f.slice(start, Math.min(f.size, start + partBytes)).arrayBuffer();
    // SubtleCrypto copies the bytes and hashes them off the page's thread.
    const part = crypto.subtle.digest("SHA-256", buf);
    const b = new Uint8Array(buf);
    for (let o = 0; o < b.length; o += HASH_STEP) {
      whole.update(b.subarray(o, o + HASH_STEP));
      await yieldToPage();
      throwIfAborted(op, signal);
    }
    parts.push(hex(await part));
  }
  return { sha256: whole.hex(), parts };
}
