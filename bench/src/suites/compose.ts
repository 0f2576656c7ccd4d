import { createComposer, type Provider } from '@cairn/compose';
import { compare, comparisonTable, type Suite } from '../harness.js';

const PROVIDERS = 10;
const OPS = 20;
const MISS_RUNS = 401;

const result = (i: number) => ({
  text: `provider ${i} says hello`,
  values: { [`v${i}`]: i, shared: i },
});

/**
 * Ten providers returning a little text and values: after ~1 ms (a timer, like a fast I/O
 * call), optionally reading `ctx.signal` as an I/O call would, or at once (pure CPU cost).
 */
function providers(kind: 'timer' | 'timer+signal' | 'instant'): Provider[] {
  return Array.from({ length: PROVIDERS }, (_, i) => ({
    name: `P${String(i).padStart(2, '0')}`,
    position: i,
    get: (ctx) => {
      if (kind === 'instant') return Promise.resolve(result(i));
      // Like an I/O call handed the signal: listen for abort while waiting.
      const signal = kind === 'timer+signal' ? ctx.signal : undefined;
      return new Promise((resolve, reject) => {
        const onAbort = () => {
          clearTimeout(timer);
          reject(signal?.reason);
        };
        const timer = setTimeout(() => {
          signal?.removeEventListener('abort', onAbort);
          resolve(result(i));
        }, 1);
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    },
  }));
}

const ctx = { state: undefined, version: undefined, signal: new AbortController().signal };
let n = 0;

/** One composition on a miss (a new message id) against a bare Promise.all of the same providers. */
function missCase(list: Provider[]) {
  const composer = createComposer({ providers: list, cache: { max: 1000 }, timeoutMs: 3000 });
  return {
    composer,
    missOnce: () => composer.compose({ id: `miss-${n++}` }),
    floorOnce: () =>
      Promise.all(list.map((p) => p.get({ ...ctx, message: { id: `floor-${n++}` } }))),
  };
}

const suite: Suite = {
  id: 'compose',
  title: '@cairn/compose: composition overhead',
  async run(log) {
    const { composer, missOnce, floorOnce } = missCase(providers('timer'));
    const withSignal = missCase(providers('timer+signal'));
    const instant = missCase(providers('instant'));
    const miss = async () => {
      let last: unknown;
      for (let i = 0; i < OPS; i++) last = await missOnce();
      return last;
    };
    const hot = { id: 'hot' };
    await composer.compose(hot);
    const hit = async () => {
      let last: unknown;
      for (let i = 0; i < OPS; i++) last = await composer.compose(hot);
      return last;
    };
    log(`${PROVIDERS} providers of ~1 ms each (a 1 ms timer)`);
    const rows = [
      // One composition a run and many runs: a 1 ms timer fires on a millisecond tick, so a
      // single run on a busy machine can take several ms; the median over many runs is what
      // the composer adds, not what the scheduler did.
      await compare({
        name: `miss: compose with ${PROVIDERS} providers (1 x, ${MISS_RUNS} runs)`,
        baseline: { name: 'bare Promise.all of the same providers', run: floorOnce },
        subject: { name: 'composer.compose, cache miss', run: missOnce },
        warmup: 20,
        runs: MISS_RUNS,
        target: { maxRatio: 1.2 },
      }),
      await compare({
        name: `miss: the same, providers pass ctx.signal to their timer (1 x, ${MISS_RUNS} runs)`,
        baseline: { name: 'bare Promise.all of the same providers', run: withSignal.floorOnce },
        subject: { name: 'composer.compose, cache miss', run: withSignal.missOnce },
        warmup: 20,
        runs: MISS_RUNS,
        target: { maxRatio: 1.2 },
      }),
      await compare({
        name: `miss: providers that resolve at once, CPU cost only (1 x, ${MISS_RUNS} runs)`,
        baseline: { name: 'bare Promise.all of the same providers', run: instant.floorOnce },
        subject: { name: 'composer.compose, cache miss', run: instant.missOnce },
        warmup: 50,
        runs: MISS_RUNS,
      }),
      await compare({
        name: `hit: compose of a cached message (${OPS} x a run)`,
        baseline: { name: 'composer.compose, cache miss', run: miss },
        subject: { name: 'composer.compose, cache hit', run: hit },
        warmup: 3,
        runs: 15,
        target: { maxRatio: 0.01, label: '< 1% of a miss' },
      }),
    ];
    const s = composer.stats;
    log(`cache stats after the runs: ${s.hits} hits, ${s.misses} misses, size ${s.size}`);
    return {
      markdown: `${comparisonTable(rows)}

The floor is \`Promise.all\` over the same ten providers' \`get\`, nothing else. A miss also
checks the options, selects and orders the providers, arms one timer per distinct budget,
copies and freezes each result, merges text, values and data, and stores the composition in
the LRU cache (max 1000, so misses also pay for evictions). A provider's AbortController is
made only when it reads \`ctx.signal\` (second row: all ten do). The third row has no I/O to
hide behind: it is the composer's CPU cost per composition of ten providers, in absolute
terms the difference of the two medians. A hit checks the options, builds the key and reads
the cache. Miss rows time one composition a run over many runs and take the median, because
a 1 ms timer fires on a millisecond tick and a busy machine stretches single runs.`,
    };
  },
};
export default suite;
