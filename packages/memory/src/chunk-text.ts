import { CairnError, checkKeys, keysOf } from '@cairn/core';

export interface ChunkOptions {
  /** The longest chunk, in characters (default 1000). */
  chunkSize?: number;
  /** Characters repeated from the end of one chunk at the start of the next (default 100). */
  overlap?: number;
}

/** Checks chunking options, filling in the defaults. */
export function checkChunkOptions(options: ChunkOptions = {}): {
  chunkSize: number;
  overlap: number;
} {
  const chunkSize = options.chunkSize ?? 1000;
  const overlap = options.overlap ?? Math.min(100, Math.floor(chunkSize / 10));
  if (!Number.isInteger(chunkSize) || chunkSize < 1) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `chunkSize must be a positive integer, got ${String(chunkSize)}`,
    );
  }
  if (!Number.isInteger(overlap) || overlap < 0 || overlap >= chunkSize) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `overlap must be an integer from 0 to chunkSize - 1 (${chunkSize - 1}), got ${String(overlap)}`,
    );
  }
  return { chunkSize, overlap };
}

const isSpace = (c: string | undefined) => c === undefined || /\s/.test(c);
const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff;

/**
 * Splits text into chunks of at most `chunkSize` characters, each starting up to
 * `overlap` characters before the previous one ended. Cuts fall after a sentence end or
 * on whitespace when one lies in the second half of the window, so words are not split
 * unless a single word is longer than the chunk (and then never inside a surrogate pair).
 * Blank chunks are dropped.
 *
 * @example
 * ```ts
 * chunkText(longText, { chunkSize: 500, overlap: 50 });
 * ```
 */
export function chunkText(text: string, options: ChunkOptions = {}): string[] {
  checkKeys(options, 'chunkText options', keysOf<ChunkOptions>()(['chunkSize', 'overlap']));
  const { chunkSize, overlap } = checkChunkOptions(options);
  const chunks: string[] = [];
  let start = 0;
  while (start < text.length) {
    while (start < text.length && isSpace(text[start])) start++;
    if (start >= text.length) break;
    let end = Math.min(start + chunkSize, text.length);
    if (end < text.length) {
      const window = text.slice(start, end);
      const min = Math.floor(chunkSize / 2);
      const sentence = Math.max(
        window.lastIndexOf('. '),
        window.lastIndexOf('? '),
        window.lastIndexOf('! '),
        window.lastIndexOf('\n'),
      );
      let cut = -1;
      if (sentence >= min) cut = sentence + 1;
      else {
        // A cut at i keeps text[start, start + i): fine when text[start + i] is whitespace.
        for (let i = window.length; i > min; i--) {
          if (isSpace(text[start + i])) {
            cut = i;
            break;
          }
        }
      }
      if (cut > 0) end = start + cut;
      // A word longer than the chunk is cut, but not between the halves of a surrogate pair.
      else if (isHighSurrogate(text.charCodeAt(end - 1)) && end - 1 > start) end--;
    }
    const chunk = text.slice(start, end).trim();
    if (chunk) chunks.push(chunk);
    if (end >= text.length) break;
    // Step back by the overlap, then forward to the start of a word.
    let next = Math.max(end - overlap, start + 1);
    if (next < end && !isSpace(text[next - 1])) {
      while (next < end && !isSpace(text[next - 1])) next++;
    }
    start = next;
  }
  return chunks;
}
