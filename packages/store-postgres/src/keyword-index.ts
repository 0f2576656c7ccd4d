import { createHash } from 'node:crypto';
import { termCounts } from '@cairn/store/adapter';

// Keyword search tokenizes in JavaScript with the tokenizer every store shares, so
// Postgres neither stems nor drops stop words of its own: the `search` tsvector holds
// each token as it is (positions 1..tf carry the term frequency) and `search_len` the
// token count, from which the query computes BM25 as the reference store does.

/** Postgres refuses a lexeme longer than this (bytes); longer tokens are indexed by digest. */
const MAX_LEXEME_BYTES = 2046;
/** A tsvector holds at most 256 positions per lexeme: term frequencies saturate there. */
const MAX_POSITIONS = 256;
/** A tsvector's lexemes may total 1 MiB; past this budget, further new words go unindexed. */
const MAX_LEXEME_TOTAL = (1 << 20) - 1;

/** The lexeme for a token: itself, or a digest no token can equal (tokens have no `#`). */
export function lexeme(token: string): string {
  return Buffer.byteLength(token) <= MAX_LEXEME_BYTES
    ? token
    : `#${createHash('sha256').update(token).digest('hex').slice(0, 32)}`;
}

const quote = (lex: string) => `'${lex.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`;

/** The tsvector literal and token count of a memory text. */
export function searchVector(text: string): { vector: string; length: number } {
  const { counts, length } = termCounts(text);
  const parts: string[] = [];
  let budget = MAX_LEXEME_TOTAL;
  for (const [token, n] of counts) {
    const lex = lexeme(token);
    budget -= Buffer.byteLength(lex);
    if (budget < 0) break;
    const positions = Array.from({ length: Math.min(n, MAX_POSITIONS) }, (_, i) => i + 1);
    parts.push(`${quote(lex)}:${positions.join(',')}`);
  }
  return { vector: parts.join(' '), length };
}

/** The query's distinct lexemes, each as a one-word tsquery literal and all of them or-ed. */
export function searchQuery(words: readonly string[]): {
  lexemes: string[];
  single: string[];
  any: string;
} {
  const lexemes = [...new Set(words.map(lexeme))];
  const single = lexemes.map(quote);
  return { lexemes, single, any: single.join(' | ') };
}
