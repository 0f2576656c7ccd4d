/**
 * This process's copy of `cairn_memory_codes` (the sign-bit codes of the stored
 * embeddings, see migration 11), scanned by Hamming distance to choose the candidates of
 * an approximate vector search. It is a cache of the table, never a source of truth:
 *
 * - Before each search it reads the table's rows after the last `n` it saw (every change
 *   to a vector, in any process, appends one: the new code, or NULL for a vector or memory
 *   that is gone), so it holds what was committed when the search began.
 * - Every candidate it gives is read again from `cairn_memories`, through the filter, and
 *   scored exactly; a code it still holds for a deleted memory finds no row. Staleness can
 *   cost recall, never a wrong or a forgotten result.
 *
 * Codes are kept in seq order (seqs only grow), so a memory's slot is a binary search away.
 */
export class CodeIndex {
  /** 32-bit words per code; 0 before the first code. */
  #words = 0;
  #codes = new Int32Array(0);
  /** The first words of each code again, side by side: what stage one reads. */
  #prefix = new Int32Array(0);
  /** Words per prefix. */
  #p = 0;
  /** The seq of each slot, ascending; a removed slot keeps its seq and is marked dead. */
  #seqs = new Float64Array(0);
  #dead = new Uint8Array(0);
  #slots = 0;
  #deadCount = 0;
  /** Stage one's distances, reused from search to search. */
  #scratch = new Uint8Array(0);
  /** The last `n` of `cairn_memory_codes` applied. */
  #lastN = 0;

  /** How many codes it holds. */
  get size(): number {
    return this.#slots - this.#deadCount;
  }

  /** The code width, in 32-bit words, of the vectors it holds (0: none yet). */
  get words(): number {
    return this.#words;
  }

  get lastN(): number {
    return this.#lastN;
  }

  /** Forgets everything: the next `apply` starts from the table's first row. */
  reset(): void {
    this.#words = 0;
    this.#p = 0;
    this.#codes = new Int32Array(0);
    this.#prefix = new Int32Array(0);
    this.#seqs = new Float64Array(0);
    this.#dead = new Uint8Array(0);
    this.#scratch = new Uint8Array(0);
    this.#slots = 0;
    this.#deadCount = 0;
    this.#lastN = 0;
  }

  /** Applies the table's rows with `n` past `lastN`, in `n` order. */
  apply(rows: Iterable<unknown[]>): void {
    for (const r of rows) {
      const n = r[0] as number;
      const seq = r[1] as number;
      const code = r[2] as Uint8Array | null;
      this.#lastN = n;
      if (code === null || code.byteLength === 0) {
        this.#remove(seq);
        continue;
      }
      const words = Math.ceil(code.byteLength / 4);
      // Another width: the space changed (an emptied store given a new embedder). The
      // codes of the old width can match no query any more.
      if (words !== this.#words) this.#rewiden(words);
      this.#put(seq, code);
    }
    if (this.#deadCount > 1024 && this.#deadCount * 4 > this.#slots) this.#compact();
  }

  /**
   * The seqs of the `k` codes that best match `query` (all of them when it holds no more
   * than `k`), in no particular order. On a large index, the Hamming distance over the
   * first words (the first 128 dimensions) keeps a share of the codes, and those are ranked
   * by the query's own values against their signs (the asymmetric distance: the sum of the
   * query's values, each negated where the code's bit is clear), which loses less than
   * comparing two codes.
   */
  nearest(query: CodeQuery, k: number): number[] {
    const live = this.size;
    const out: number[] = [];
    const dead = this.#dead;
    const slots = this.#slots;
    if (live <= k) {
      for (let s = 0; s < slots; s++) if (!dead[s]) out.push(this.#seqs[s]!);
      return out;
    }
    const W = this.#words;
    const codes = this.#codes;
    const code = query.code;
    // Stage one: the prefix distance of every code, then the smallest that keeps `keep`.
    const P = this.#p;
    const keep = Math.max(k * PREFIX_KEEP_FACTOR, Math.ceil(live * PREFIX_KEEP_SHARE));
    const chosen = new Int32Array(Math.min(keep, live));
    let chosenCount = 0;
    if (keep < live) {
      const prefix = this.#prefix;
      if (this.#scratch.length < slots) this.#scratch = new Uint8Array(this.#seqs.length);
      const d1 = this.#scratch;
      const hist = new Uint32Array(P * 32 + 2);
      if (P === 4) {
        const [q0, q1, q2, q3] = code as unknown as [number, number, number, number];
        for (let s = 0, o = 0; s < slots; s++, o += 4) {
          const d =
            popcount(prefix[o]! ^ q0) +
            popcount(prefix[o + 1]! ^ q1) +
            popcount(prefix[o + 2]! ^ q2) +
            popcount(prefix[o + 3]! ^ q3);
          d1[s] = d;
          hist[d]!++;
        }
      } else {
        for (let s = 0, o = 0; s < slots; s++, o += P) {
          let d = 0;
          for (let w = 0; w < P; w++) d += popcount(prefix[o + w]! ^ code[w]!);
          d1[s] = d;
          hist[d]!++;
        }
      }
      const cut = threshold(hist, keep);
      // The histogram counts dead slots too: skipped here, they leave a few fewer than `keep`.
      let room = keep;
      for (let d = 0; d < cut; d++) room -= hist[d]!;
      for (let s = 0; s < slots; s++) {
        const d = d1[s]!;
        if ((d < cut || (d === cut && room-- > 0)) && !dead[s]) chosen[chosenCount++] = s;
      }
    } else {
      for (let s = 0; s < slots; s++) if (!dead[s]) chosen[chosenCount++] = s;
    }
    // Stage two: the whole codes' distance, keeping `k * FULL_KEEP_FACTOR` of those.
    let kept = chosen;
    let keptCount = chosenCount;
    const keep2 = k * FULL_KEEP_FACTOR;
    if (keep2 < chosenCount && W > P) {
      const d2 = new Uint16Array(chosenCount);
      const hist = new Uint32Array(W * 32 + 1);
      for (let i = 0; i < chosenCount; i++) {
        const o = chosen[i]! * W;
        let d = 0;
        for (let w = 0; w < W; w++) d += popcount(codes[o + w]! ^ code[w]!);
        d2[i] = d;
        hist[d]!++;
      }
      const cut = threshold(hist, keep2);
      let room = keep2;
      for (let d = 0; d < cut; d++) room -= hist[d]!;
      kept = new Int32Array(keep2);
      keptCount = 0;
      for (let i = 0; i < chosenCount; i++) {
        const d = d2[i]!;
        if (d < cut || (d === cut && room-- > 0)) kept[keptCount++] = chosen[i]!;
      }
    }
    if (keptCount <= k) {
      for (let i = 0; i < keptCount; i++) out.push(this.#seqs[kept[i]!]!);
      return out;
    }
    // Stage three: the asymmetric score of each code kept, then the `k` best.
    const table = query.table;
    const B = W * 4;
    const bytes = new Uint8Array(codes.buffer, codes.byteOffset, slots * B);
    const scores = new Float64Array(keptCount);
    for (let i = 0; i < keptCount; i++) {
      const o = kept[i]! * B;
      let score = 0;
      for (let j = 0, t = 0; j < B; j++, t += 256) score += table[t + bytes[o + j]!]!;
      scores[i] = score;
    }
    const sorted = scores.slice().sort();
    const cut = sorted[keptCount - k]!;
    let room = 0;
    for (let i = keptCount - k; i < keptCount && sorted[i] === cut; i++) room++;
    for (let i = 0; i < keptCount; i++) {
      const score = scores[i]!;
      if (score > cut || (score === cut && room-- > 0)) out.push(this.#seqs[kept[i]!]!);
    }
    return out;
  }

  /**
   * A query for `nearest`: its code, laid out as the stored ones (see `CODE_OF` in
   * migrations.ts), and for each byte of a code and each value of that byte, the sum of
   * the query's values, each negated where the bit is clear.
   */
  static query(vector: readonly number[], words: number): CodeQuery {
    const bytes = new Uint8Array(words * 4);
    const table = new Float64Array(words * 4 * 256);
    for (let j = 0; j < words * 4; j++) {
      const t = j * 256;
      let clear = 0;
      for (let i = 0; i < 8; i++) {
        const x = Math.fround(vector[j * 8 + i] ?? 0);
        if (x > 0) bytes[j]! |= 1 << i;
        if (!Number.isNaN(x)) clear -= x;
      }
      table[t] = clear;
      // Each value is a smaller one with its lowest bit set: that dimension turns positive.
      for (let b = 1; b < 256; b++) {
        const low = b & -b;
        const x = Math.fround(vector[j * 8 + 31 - Math.clz32(low)] ?? 0);
        table[t + b] = table[t + (b ^ low)]! + (Number.isNaN(x) ? 0 : 2 * x);
      }
    }
    return { code: new Int32Array(bytes.buffer), table };
  }

  #find(seq: number): number {
    let lo = 0;
    let hi = this.#slots;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#seqs[mid]! < seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  #put(seq: number, code: Uint8Array): void {
    const slot =
      this.#slots > 0 && this.#seqs[this.#slots - 1]! < seq ? this.#slots : this.#find(seq);
    if (slot === this.#slots || this.#seqs[slot] !== seq) {
      // A new seq: at the end (the usual case, seqs only grow), else shifted into place
      // (a memory stored without a vector and given one later).
      this.#grow(this.#slots + 1);
      const W = this.#words;
      if (slot < this.#slots) {
        const P = this.#p;
        this.#codes.copyWithin((slot + 1) * W, slot * W, this.#slots * W);
        this.#prefix.copyWithin((slot + 1) * P, slot * P, this.#slots * P);
        this.#seqs.copyWithin(slot + 1, slot, this.#slots);
        this.#dead.copyWithin(slot + 1, slot, this.#slots);
      }
      this.#slots++;
      this.#seqs[slot] = seq;
      this.#dead[slot] = 0;
    } else if (this.#dead[slot]) {
      this.#dead[slot] = 0;
      this.#deadCount--;
    }
    const bytes = new Uint8Array(this.#codes.buffer, slot * this.#words * 4, this.#words * 4);
    bytes.fill(0);
    bytes.set(code.subarray(0, this.#words * 4));
    const P = this.#p;
    this.#prefix.set(this.#codes.subarray(slot * this.#words, slot * this.#words + P), slot * P);
  }

  #remove(seq: number): void {
    if (this.#slots === 0) return;
    const slot = this.#find(seq);
    if (slot < this.#slots && this.#seqs[slot] === seq && !this.#dead[slot]) {
      this.#dead[slot] = 1;
      this.#deadCount++;
    }
  }

  #grow(slots: number): void {
    if (slots <= this.#seqs.length) return;
    const capacity = Math.max(slots, Math.ceil(this.#seqs.length * 1.5), 1024);
    const codes = new Int32Array(capacity * this.#words);
    codes.set(this.#codes.subarray(0, this.#slots * this.#words));
    const prefix = new Int32Array(capacity * this.#p);
    prefix.set(this.#prefix.subarray(0, this.#slots * this.#p));
    this.#prefix = prefix;
    const seqs = new Float64Array(capacity);
    seqs.set(this.#seqs.subarray(0, this.#slots));
    const dead = new Uint8Array(capacity);
    dead.set(this.#dead.subarray(0, this.#slots));
    this.#codes = codes;
    this.#seqs = seqs;
    this.#dead = dead;
  }

  #rewiden(words: number): void {
    const lastN = this.#lastN;
    this.reset();
    this.#words = words;
    this.#p = Math.min(PREFIX_WORDS, words);
    this.#lastN = lastN;
  }

  /** Drops the dead slots. */
  #compact(): void {
    const W = this.#words;
    let to = 0;
    for (let s = 0; s < this.#slots; s++) {
      if (this.#dead[s]) continue;
      if (to !== s) {
        this.#codes.copyWithin(to * W, s * W, (s + 1) * W);
        this.#prefix.copyWithin(to * this.#p, s * this.#p, (s + 1) * this.#p);
        this.#seqs[to] = this.#seqs[s]!;
        this.#dead[to] = 0;
      }
      to++;
    }
    this.#slots = to;
    this.#deadCount = 0;
  }
}

export interface CodeQuery {
  code: Int32Array;
  table: Float64Array;
}

/** Stage one compares the first 4 words (128 dimensions) of each code. */
const PREFIX_WORDS = 4;
/** Stage one keeps at least this many times `k` codes, */
const PREFIX_KEEP_FACTOR = 8;
/** and at least this share of all of them. */
const PREFIX_KEEP_SHARE = 0.01;
/** Stage two keeps this many times `k`. */
const FULL_KEEP_FACTOR = 4;

/** The smallest distance `t` with at least `want` counts at or below it. */
function threshold(hist: Uint32Array, want: number): number {
  let seen = 0;
  for (let d = 0; d < hist.length; d++) {
    seen += hist[d]!;
    if (seen >= want) return d;
  }
  return hist.length - 1;
}

function popcount(x: number): number {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24;
}
