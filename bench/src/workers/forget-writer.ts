/**
 * One of the processes that keep writing while the `forget-audit` suite forgets a user.
 *
 *   node forget-writer.js '<json: WriterConfig>'
 *
 * Opens the store and its own thread of the forgotten user (a worker holding a thread
 * across the forget), prints "ready", waits for "go", then alternates a write for its own
 * user with a write for the forgotten user, through every package in turn, until it reads
 * "forgotten" (the forget has returned). Then it makes `late` writes for the forgotten user,
 * each followed by one for its own, and prints one JSON line: the outcome of every write by
 * phase and kind, and every canary it sent for the forgotten user.
 */
import {
  canary,
  type Kind,
  openStore,
  outcome,
  PER_WRITE,
  type Target,
  userId,
  Writers,
} from '../canaries.js';

export interface WriterConfig {
  target: Target;
  encrypted: boolean;
  victim: number;
  user: number;
  worker: number;
  late: number;
  kinds: Kind[];
}

/** Outcomes counted by kind: `ok`, `forgotten`, or an error message. */
export type Tally = Record<string, Record<string, number>>;

export interface WriterResult {
  /** The forgotten user's writes made before "forgotten" arrived (during the forget). */
  during: Tally;
  /** The forgotten user's writes made after the forget returned. */
  late: Tally;
  /** Writes for the worker's own user. */
  own: Tally;
  /** Every canary sent for the forgotten user (written or not). */
  victimCanaries: string[];
}

const config = JSON.parse(process.argv[2]!) as WriterConfig;
const store = await openStore(config.target, config.encrypted);
const writers = new Writers(store);
const tag = `w${config.worker}`;
const victim = userId(config.victim);
const own = userId(config.user);
await writers.open(victim, tag);

const result: WriterResult = { during: {}, late: {}, own: {}, victimCanaries: [] };
const count = (t: Tally, kind: string, what: string) => {
  t[kind] ??= {};
  t[kind][what] = (t[kind][what] ?? 0) + 1;
};
let n = 0;
const words = (user: number, kind: Kind) =>
  Array.from({ length: PER_WRITE }, () => canary(user, kind, n++));

let forgotten = false;
let go!: () => void;
const started = new Promise<void>((resolve) => {
  go = resolve;
});
process.stdin.on('data', (d) => {
  const s = String(d);
  if (s.includes('go')) go();
  if (s.includes('forgotten')) forgotten = true;
});
process.stdout.write('ready\n');
await started;

let i = 0;
async function step(phase: Tally) {
  const kind = config.kinds[i % config.kinds.length]!;
  const ownKind = config.kinds[(i + 3) % config.kinds.length]!;
  i++;
  const sent = words(config.victim, kind);
  result.victimCanaries.push(...sent);
  count(phase, kind, await outcome(() => writers.write(kind, victim, tag, sent), victim));
  count(
    result.own,
    ownKind,
    await outcome(() => writers.write(ownKind, own, tag, words(config.user, ownKind)), own),
  );
}

while (!forgotten) await step(result.during);
for (let late = 0; late < config.late; late++) await step(result.late);
await store.close();
// A pipe is written asynchronously: exit only once the whole line is out.
process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
