import { brotliDecompressSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { packText, unpackJson } from '../src/packed.js';

describe('packText', () => {
  // The window is fitted to the text: lengths on either side of a window's size, and past
  // the largest window (16 MB), where Brotli refers back no further than it.
  it.each([0, 1, 1000, 1008, 1009, 16_368, 16_369, 100_000, 17_000_000])(
    'gives back a string of %i characters',
    (n) => {
      const value = { text: 'the brown fox, '.repeat(Math.ceil(n / 15)).slice(0, n) };
      const packed = packText(JSON.stringify(value));
      expect(unpackJson(packed)).toEqual(value);
      expect(brotliDecompressSync(packed).toString()).toBe(JSON.stringify(value));
    },
  );

  it('packs a chat message to about three fifths of its JSON', () => {
    const message = {
      lc: 1,
      type: 'constructor',
      id: ['langchain_core', 'messages', 'AIMessage'],
      kwargs: {
        content:
          'The soil holds more carbon than the air and every plant together. Roots feed it, ' +
          'fungi move it, and when a field is ploughed every year much of it goes back into the ' +
          'air; a cover crop in winter and fewer passes of the plough keep more of it where it is.',
        tool_calls: [],
        additional_kwargs: {},
        response_metadata: {},
      },
    };
    const json = Buffer.byteLength(JSON.stringify(message));
    const packed = packText(JSON.stringify(message));
    expect(packed.length).toBeLessThan(json * 0.65);
    expect(unpackJson(packed)).toEqual(message);
  });
});
