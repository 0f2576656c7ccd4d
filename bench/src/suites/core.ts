import { applyUpdate, defineState, field, reducers, type StateOf } from '@cairn/core';
import { compare, comparisonTable, loop, type Suite } from '../harness.js';

const fields: Record<string, ReturnType<typeof field<unknown>>> = {};
for (let i = 0; i < 50; i++) {
  fields[`f${i}`] =
    i % 5 === 0
      ? (field<unknown>({
          reducer: reducers.appendUnique as never,
          default: () => ['a', 'b', 'c'],
        }) as never)
      : (field<unknown>({ default: () => ({ n: i, label: `field ${i}` }) }) as never);
}
const Wide = defineState(fields);

const suite: Suite = {
  id: 'core',
  title: '@cairn/core: applyUpdate',
  async run(log) {
    const state = Wide.initial() as StateOf<typeof Wide>;
    const ITER = 20_000;
    log(`applyUpdate on a 50-field state, ${ITER} updates a run`);
    const rows = [
      await compare({
        name: `applyUpdate, 50 fields, 1 replaced field (${ITER} x)`,
        baseline: {
          name: 'object spread',
          run: loop(ITER, () => ({ ...state, f1: { n: 2, label: 'changed' } })),
        },
        subject: {
          name: 'applyUpdate',
          run: loop(ITER, () =>
            applyUpdate(Wide, state, { f1: { n: 2, label: 'changed' } } as never),
          ),
        },
        runs: 9,
      }),
      await compare({
        name: `applyUpdate, 50 fields, appendUnique of 1 item (${ITER} x)`,
        baseline: {
          name: 'object spread + concat',
          run: loop(ITER, () => ({ ...state, f0: [...(state.f0 as string[]), 'd'] })),
        },
        subject: {
          name: 'applyUpdate',
          run: loop(ITER, () => applyUpdate(Wide, state, { f0: ['d'] } as never)),
        },
        runs: 9,
      }),
    ];
    return {
      markdown: `${comparisonTable(rows)}\n\nThe floor is a hand-written object spread of the same change. applyUpdate also checks the\nfield exists, that the value is JSON, runs the reducer and compares old and new values to\nreport \`changed\`; the ratio is what that costs per update.`,
    };
  },
};
export default suite;
