/** Small, deterministic text helpers the research agent works with. */

const STOPWORDS = new Set(
  `a about above after again against all also am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have having
he her here hers him his how i if in into is it its itself just me more most my no nor not now of off on
once only or other our ours out over own same she should so some such than that the their theirs them then
there these they this those through to too under until up very was we were what when where which while who
whom why will with would you your yours per often usually many much one two three several within without
affect affects role play plays relate relates change changes influence influences effect do does did
shape shapes whether there using use used may might also like get gets make makes made way ways`.split(
    /\s+/,
  ),
);

/** Lower-cases, drops punctuation and stopwords, and folds plurals ("microbes" -> "microbe"). */
export function terms(text: string): string[] {
  const out: string[] = [];
  for (const raw of text.toLowerCase().split(/[^a-z0-9-]+/)) {
    const word = raw.replace(/^-+|-+$/g, '');
    if (word.length < 3 || STOPWORDS.has(word) || /^\d+$/.test(word)) continue;
    out.push(stem(word));
  }
  return out;
}

/** The distinct terms of a text, in order of first appearance. */
export function distinctTerms(text: string): string[] {
  return [...new Set(terms(text))];
}

/** Folds simple English plurals so singular and plural match. */
export function stem(word: string): string {
  if (word.length > 4 && word.endsWith('ies')) return `${word.slice(0, -3)}y`;
  if (word.length > 3 && word.endsWith('s') && !/(ss|us|is|ous)$/.test(word))
    return word.slice(0, -1);
  return word;
}

/** Splits prose into sentences (on ., ! or ? followed by a capital letter). */
export function sentences(text: string): string[] {
  return text
    .replace(/\s+/g, ' ')
    .split(/(?<=[.!?])\s+(?=[A-Z0-9])/)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/** Cuts a text to at most `max` characters at a word boundary, with an ellipsis. */
export function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  const cut = text.slice(0, max - 1);
  const space = cut.lastIndexOf(' ');
  return `${(space > max / 2 ? cut.slice(0, space) : cut).replace(/[,;:.]$/, '')}…`;
}

/** "nitrogen fixation" -> "Nitrogen fixation". */
export function capitalize(text: string): string {
  return text.length === 0 ? text : text[0]!.toUpperCase() + text.slice(1);
}
