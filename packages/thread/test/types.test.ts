import { createMemoryStore } from '@cairn/store';
import { describe, expectTypeOf, it } from 'vitest';
import { openThread, type Thread } from '../src/index.js';
import { Research } from './schema.js';

describe('types', () => {
  it('state, update and turn state are typed by the schema', async () => {
    const thread = await openThread(createMemoryStore(), { schema: Research });
    expectTypeOf(thread).toEqualTypeOf<Thread<typeof Research>>();
    expectTypeOf(thread.state.keyInsights).toEqualTypeOf<string[]>();
    expectTypeOf(thread.state.objective).toEqualTypeOf<string | undefined>();
    expectTypeOf(thread.state).not.toHaveProperty('files');
    expectTypeOf(thread.update).parameter(0).toEqualTypeOf<{
      objective?: string;
      keyInsights?: string[];
      notes?: Record<string, string>;
      counter?: number;
      blob?: string;
    }>();
    const turn = await thread.beginTurn();
    expectTypeOf(turn.state).toEqualTypeOf<{ files: string[]; phase: string }>();
    expectTypeOf(thread.stateAt).returns.resolves.toEqualTypeOf<typeof thread.state>();
    expectTypeOf(thread.version).toEqualTypeOf<string>();

    // Wrong update types do not compile (checked by `tsc --noEmit`, which includes test/).
    const wrong = async () => {
      // @ts-expect-error keyInsights takes string[]
      await thread.update({ keyInsights: 'one' });
      // @ts-expect-error unknown field
      await thread.update({ nope: 1 });
      // @ts-expect-error turn-scoped field on the thread
      await thread.update({ files: ['a'] });
      // @ts-expect-error thread-scoped field on the turn
      await turn.update({ counter: 1 });
      // @ts-expect-error phase is a string
      await turn.update({ phase: 2 });
    };
    expectTypeOf(wrong).toBeFunction();
  });

  it('a thread opened without a schema has an empty state', async () => {
    const plain = await openThread(createMemoryStore());
    // biome-ignore lint/complexity/noBannedTypes: the state of a schema with no fields
    expectTypeOf(plain.state).toEqualTypeOf<{}>();
  });
});
