import { brotliCompressSync, brotliDecompressSync, constants } from 'node:zlib';

/**
 * Text as the store keeps what it reads back only whole (a message's data, a segment of a
 * branch's state log): UTF-8 text compressed with Brotli, whose built-in dictionary of
 * common words and markup shrinks even a few hundred bytes of chat text, which Postgres's
 * own compression (pglz or lz4, only for values of 2 KB or more) leaves as they are.
 * Quality 9, on the bench's chat text: a ~500-byte message stores 15% more than at quality
 * 11, which takes far longer; a segment of the LangGraph chat's log (~14 KB of JSON) is as
 * small as at quality 5 to 8. The window is fitted to the text (the smallest that holds all
 * of it): the output is as small, without the default 4 MB window's tables to set up, which
 * on values this small cost more than the compression. Output buffers are sized to the value
 * too (`chunkSize`, else 16 KB per call). How long packing and unpacking take where it
 * matters is measured in bench/ (the langgraph-postgres and postgres suites). A lower
 * `quality` packs faster and larger (3: ~4x faster than 9 on a segment of the state log, ~15% larger).
 */
export function packText(value: string, quality = 9): Buffer {
  const text = Buffer.from(value);
  const window = Math.ceil(Math.log2(text.length + 16));
  return brotliCompressSync(text, {
    chunkSize: text.length + 64,
    params: {
      [constants.BROTLI_PARAM_QUALITY]: quality,
      [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
      [constants.BROTLI_PARAM_SIZE_HINT]: text.length,
      [constants.BROTLI_PARAM_LGWIN]: Math.min(
        constants.BROTLI_MAX_WINDOW_BITS,
        Math.max(constants.BROTLI_MIN_WINDOW_BITS, window),
      ),
    },
  });
}

/** The text `packText` packed. */
export function unpackText(bytes: Uint8Array): string {
  const chunkSize = Math.max(1024, bytes.length * 4);
  return brotliDecompressSync(bytes, { chunkSize }).toString('utf8');
}

/** The JSON value whose text `packText` packed. */
export function unpackJson<T>(bytes: Uint8Array): T {
  return JSON.parse(unpackText(bytes)) as T;
}
