const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
let lastMs = 0;
let seq = 0;

/**
 * A new UUIDv7 string: time-ordered (ids made later in this process sort after earlier
 * ones), random otherwise. Used for every id Cairn generates.
 *
 * @example
 * ```ts
 * const id = newId(); // '0193f1c2-5b7e-7a3c-9d41-2f0c6e8a1b22'
 * ```
 */
export function newId(): string {
  let ms = Date.now();
  if (ms <= lastMs) {
    // Same millisecond (or a clock step back): keep ids increasing with a counter
    // in the 12 bits after the version, carrying into the timestamp if it fills.
    seq++;
    if (seq > 0xfff) {
      seq = 0;
      lastMs++;
    }
    ms = lastMs;
  } else {
    lastMs = ms;
    seq = 0;
  }
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  b[0] = (ms / 2 ** 40) & 0xff;
  b[1] = (ms / 2 ** 32) & 0xff;
  b[2] = (ms >>> 24) & 0xff;
  b[3] = (ms >>> 16) & 0xff;
  b[4] = (ms >>> 8) & 0xff;
  b[5] = ms & 0xff;
  b[6] = 0x70 | ((seq >>> 8) & 0x0f);
  b[7] = seq & 0xff;
  b[8] = 0x80 | (b[8]! & 0x3f);
  const h = Array.from(b, (x) => HEX[x]!);
  return `${h.slice(0, 4).join('')}-${h.slice(4, 6).join('')}-${h.slice(6, 8).join('')}-${h.slice(8, 10).join('')}-${h.slice(10).join('')}`;
}
