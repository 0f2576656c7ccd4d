import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import {
  applyUpdate,
  type CairnError,
  defineState,
  field,
  isCairnError,
  migrateState,
  reducers,
  SCHEMA_VERSION_KEY,
  type StateOf,
  type ThreadStateOf,
  type TurnStateOf,
  type UpdateOf,
} from '../src/index.js';

interface Img {
  url: string;
}
const Research = defineState({
  objective: field<string>(),
  keyInsights: field<string[]>({ reducer: reducers.appendUnique, default: () => [] }),
  viewedImages: field<Record<string, Img>>({ reducer: reducers.mergeRecord, default: () => ({}) }),
  uploadedFiles: field<string[]>({ scope: 'turn', default: () => [] }),
  hypothesis: field({ schema: z.string().min(1) }),
  stats: field<{ n: number; tags: string[] }>({ default: () => ({ n: 0, tags: [] }) }),
});

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    return isCairnError(e) ? e.code : 'not a CairnError';
  }
  return undefined;
}

describe('defineState / initial', () => {
  it('fills defaults and leaves fields without one absent', () => {
    expect(Research.initial()).toEqual({
      keyInsights: [],
      viewedImages: {},
      uploadedFiles: [],
      stats: { n: 0, tags: [] },
    });
  });
  it('gives each state its own default objects', () => {
    expect(Research.initial().keyInsights).not.toBe(Research.initial().keyInsights);
  });
  it('initial(scope) and keys(scope) split thread and turn fields', () => {
    expect(Research.initial('turn')).toEqual({ uploadedFiles: [] });
    expect(Research.keys('turn')).toEqual(['uploadedFiles']);
    expect(Research.keys('thread')).toEqual([
      'objective',
      'keyInsights',
      'viewedImages',
      'hypothesis',
      'stats',
    ]);
  });
  it('rejects a field not made with field()', () => {
    expect(codeOf(() => defineState({ x: 1 as never }))).toBe('INVALID_ARGUMENT');
  });
});

describe('applyUpdate', () => {
  const s0 = Research.initial();

  it('runs each field through its reducer and reports what changed', () => {
    const { state, changed } = applyUpdate(Research, s0, {
      objective: 'soil',
      keyInsights: ['a', 'b'],
    });
    expect(state.objective).toBe('soil');
    expect(state.keyInsights).toEqual(['a', 'b']);
    expect(changed).toEqual(['objective', 'keyInsights']);
    const next = applyUpdate(Research, state, {
      keyInsights: ['b', 'c'],
      viewedImages: { x: { url: 'u' } },
    });
    expect(next.state.keyInsights).toEqual(['a', 'b', 'c']);
    expect(next.state.viewedImages).toEqual({ x: { url: 'u' } });
  });

  it('never mutates its inputs', () => {
    const state = applyUpdate(Research, s0, { keyInsights: ['a'] }).state;
    const frozen = structuredClone(state);
    const update = { keyInsights: ['b'], viewedImages: { y: { url: 'v' } } };
    applyUpdate(Research, state, update);
    expect(state).toEqual(frozen);
    expect(update).toEqual({ keyInsights: ['b'], viewedImages: { y: { url: 'v' } } });
  });

  it('keeps the identity of fields the update does not touch', () => {
    const { state } = applyUpdate(Research, s0, { objective: 'x' });
    expect(state.keyInsights).toBe(s0.keyInsights);
    expect(state.viewedImages).toBe(s0.viewedImages);
    expect(state.stats).toBe(s0.stats);
  });

  it('returns the same state object and no changes when nothing changes', () => {
    const a = applyUpdate(Research, s0, { keyInsights: ['a'] }).state;
    const b = applyUpdate(Research, a, { keyInsights: ['a'] });
    expect(b.changed).toEqual([]);
    expect(b.state).toBe(a);
  });

  it('ignores keys whose value is undefined', () => {
    expect(applyUpdate(Research, s0, { objective: undefined }).changed).toEqual([]);
  });

  it('rejects an unknown field, naming it', () => {
    try {
      applyUpdate(Research, s0, { nope: 1 } as never);
      expect.unreachable();
    } catch (e) {
      expect(isCairnError(e, 'INVALID_UPDATE')).toBe(true);
      expect((e as CairnError).message).toContain('nope');
    }
  });

  it('rejects a value its validator rejects, with the validator message', () => {
    try {
      applyUpdate(Research, s0, { hypothesis: '' });
      expect.unreachable();
    } catch (e) {
      expect(isCairnError(e, 'INVALID_UPDATE')).toBe(true);
      expect((e as CairnError).message).toContain('hypothesis');
    }
    expect(applyUpdate(Research, s0, { hypothesis: 'ok' }).state.hypothesis).toBe('ok');
  });

  it('rejects a turn field when asked for thread scope, and the reverse', () => {
    expect(
      codeOf(() => applyUpdate(Research, s0, { uploadedFiles: ['f'] }, { scope: 'thread' })),
    ).toBe('INVALID_UPDATE');
    expect(codeOf(() => applyUpdate(Research, s0, { objective: 'x' }, { scope: 'turn' }))).toBe(
      'INVALID_UPDATE',
    );
    expect(
      applyUpdate(Research, s0, { uploadedFiles: ['f'] }, { scope: 'turn' }).state.uploadedFiles,
    ).toEqual(['f']);
  });

  it('rejects a field named like an Object.prototype member as unknown, naming it', () => {
    const parsed = JSON.parse('{"__proto__": {"objective": "x"}}') as never;
    for (const [name, update] of [
      ['constructor', { constructor: 1 }],
      ['toString', { toString: 'x' }],
      ['hasOwnProperty', { hasOwnProperty: true }],
      ['__proto__', parsed],
    ] as const) {
      try {
        applyUpdate(Research, s0, update as never);
        expect.unreachable();
      } catch (e) {
        expect(isCairnError(e, 'INVALID_UPDATE')).toBe(true);
        expect((e as CairnError).message).toBe(`unknown state field "${name}"`);
        expect((e as CairnError).details).toEqual({ field: name });
      }
    }
  });

  it('a field may be named "constructor" or "toString"; "__proto__" is refused', () => {
    const Odd = defineState({
      constructor: field<number>({ reducer: (a, b) => (a ?? 0) + (b ?? 0) }),
      toString: field<string>(),
    });
    const { state, changed } = applyUpdate(Odd, Odd.initial(), { constructor: 2, toString: 's' });
    expect(changed).toEqual(['constructor', 'toString']);
    const next = applyUpdate(Odd, state, { constructor: 3, toString: 's' });
    expect(next.changed).toEqual(['constructor']);
    expect(next.state).toEqual({ constructor: 5, toString: 's' });
    expect(codeOf(() => defineState({ ['__proto__']: field() }))).toBe('INVALID_ARGUMENT');
  });

  it('rejects an update that is not an object', () => {
    expect(codeOf(() => applyUpdate(Research, s0, null as never))).toBe('INVALID_UPDATE');
    expect(codeOf(() => applyUpdate(Research, s0, [] as never))).toBe('INVALID_UPDATE');
  });

  const nonJson: Array<[string, unknown, string]> = [
    ['undefined inside an array', [1, undefined], 'stats.tags[1]'],
    ['a function', () => 1, 'stats.tags'],
    ['a BigInt', 10n, 'stats.tags'],
    ['NaN', Number.NaN, 'stats.tags'],
    ['Infinity', Number.POSITIVE_INFINITY, 'stats.tags'],
    ['a class instance', new Date(0), 'stats.tags'],
    ['a Map', new Map(), 'stats.tags'],
  ];
  for (const [what, bad, path] of nonJson) {
    it(`rejects ${what}, naming the field and path`, () => {
      try {
        applyUpdate(Research, s0, { stats: { n: 1, tags: bad as never } });
        expect.unreachable();
      } catch (e) {
        expect(isCairnError(e, 'INVALID_UPDATE')).toBe(true);
        expect((e as CairnError).message).toContain(path);
      }
    });
  }

  it('rejects a cycle', () => {
    const cyclic: Record<string, unknown> = { n: 1 };
    cyclic.tags = [cyclic];
    expect(codeOf(() => applyUpdate(Research, s0, { stats: cyclic as never }))).toBe(
      'INVALID_UPDATE',
    );
  });

  it('applies nothing when one field of the update is bad', () => {
    const state = applyUpdate(Research, s0, { objective: 'keep' }).state;
    expect(
      codeOf(() => applyUpdate(Research, state, { objective: 'changed', nope: 1 } as never)),
    ).toBe('INVALID_UPDATE');
    expect(state.objective).toBe('keep');
  });

  it('accepts shared (non-cyclic) references', () => {
    const tags = ['t'];
    expect(applyUpdate(Research, s0, { stats: { n: 1, tags }, keyInsights: tags }).changed).toEqual(
      ['stats', 'keyInsights'],
    );
  });

  it('accepts a user-written reducer', () => {
    const Counter = defineState({
      count: field<number>({ reducer: (a, b) => (a ?? 0) + (b ?? 0), default: () => 0 }),
    });
    const s1 = applyUpdate(Counter, Counter.initial(), { count: 2 }).state;
    expect(applyUpdate(Counter, s1, { count: 3 }).state.count).toBe(5);
  });
});

describe('types', () => {
  it('infers state and update types', () => {
    type S = StateOf<typeof Research>;
    type U = UpdateOf<typeof Research>;
    expectTypeOf<S['keyInsights']>().toEqualTypeOf<string[]>();
    expectTypeOf<S['objective']>().toEqualTypeOf<string | undefined>();
    expectTypeOf<S['hypothesis']>().toEqualTypeOf<string | undefined>();
    expectTypeOf<U['viewedImages']>().toEqualTypeOf<Record<string, Img> | undefined>();
    expectTypeOf<keyof ThreadStateOf<typeof Research>>().toEqualTypeOf<
      'objective' | 'keyInsights' | 'viewedImages' | 'hypothesis' | 'stats'
    >();
    expectTypeOf<keyof TurnStateOf<typeof Research>>().toEqualTypeOf<'uploadedFiles'>();
  });

  it('makes a wrong update a compile error', () => {
    const s0 = Research.initial();
    // @ts-expect-error keyInsights takes string[]
    expect(codeOf(() => applyUpdate(Research, s0, { keyInsights: 'one' }))).toBe('INVALID_UPDATE');
    // @ts-expect-error unknown field
    expect(codeOf(() => applyUpdate(Research, s0, { nope: 1 }))).toBe('INVALID_UPDATE');
    // @ts-expect-error objective is a string
    applyUpdate(Research, s0, { objective: 42 });
  });
});

describe('field options', () => {
  it('a misspelled option is INVALID_ARGUMENT naming it, never a field that silently replaces', () => {
    expect(() => field({ reduce: reducers.union } as never)).toThrow(
      'field options: unknown key "reduce" (did you mean "reducer"?)',
    );
    expect(() => field({ defualt: () => [] } as never)).toThrow(
      'field options: unknown key "defualt" (did you mean "default"?)',
    );
  });
});

describe('defineState versions and migrations', () => {
  const V1 = defineState({
    name: field<string>(),
    score: field<number>({ default: () => 0 }),
  });
  const step = { from: 1, to: 2, migrate: (s: Record<string, unknown>) => s };

  it('a schema is version 1 with no migrations unless told; a version and its chain are kept', () => {
    expect(V1.version).toBe(1);
    expect(V1.migrations).toEqual([]);
    const V3 = defineState(
      { title: field<string>() },
      {
        version: 3,
        migrations: [
          { ...step, schema: V1 },
          { from: 2, to: 3, migrate: (s) => s },
        ],
      },
    );
    expect(V3.version).toBe(3);
    expect(V3.migrations.map((m) => [m.from, m.to, m.schema === V1])).toEqual([
      [1, 2, true],
      [2, 3, false],
    ]);
    // A chain may start later than version 1: older states are then not readable.
    expect(
      defineState({}, { version: 3, migrations: [{ from: 2, to: 3, migrate: (s) => s }] }).version,
    ).toBe(3);
  });

  it('bad options are INVALID_ARGUMENT, never ignored', () => {
    const bad: [unknown, string][] = [
      [{ versoin: 2 }, 'defineState options: unknown key "versoin" (did you mean "version"?)'],
      [{ version: 0 }, 'version must be a positive integer, got 0'],
      [{ version: 1.5 }, 'version must be a positive integer, got 1.5'],
      [{ version: '2' }, 'version must be a positive integer, got 2'],
      [{ version: Number.POSITIVE_INFINITY }, 'version must be a positive integer'],
      [{ version: 2, migrations: step }, 'migrations must be an array'],
      [
        { version: 3, migrations: [{ from: 1, to: 3, migrate: step.migrate }] },
        'must go from 2 to 3, got 1→3',
      ],
      [
        { version: 3, migrations: [{ from: 2, to: 3, migrate: step.migrate }, step] },
        'migrations[0] must go from 1 to 2, got 2→3',
      ],
      [{ version: 3, migrations: [step] }, 'must go from 2 to 3, got 1→2'],
      [
        { version: 2, migrations: [{ from: 1, to: 2 }] },
        'migrations[0].migrate must be a function',
      ],
      [{ version: 2, migrations: [{ ...step, migrat: 1 }] }, 'unknown key "migrat"'],
      [{ version: 2, migrations: [null] }, 'migrations[0] must be an object'],
      [{ version: 1, migrations: [step] }, '1 migrations go below version 1'],
      [
        { version: 2, migrations: [{ ...step, schema: {} }] },
        'migrations[0].schema must be the defineState schema of version 1',
      ],
      [
        { version: 3, migrations: [step, { from: 2, to: 3, migrate: step.migrate, schema: V1 }] },
        'migrations[1].schema must be the defineState schema of version 2, got version 1',
      ],
      [null, 'defineState options must be an object'],
    ];
    for (const [options, message] of bad) {
      let error: unknown;
      try {
        defineState({ a: field<string>() }, options as never);
      } catch (e) {
        error = e;
      }
      expect(isCairnError(error, 'INVALID_ARGUMENT'), JSON.stringify(options)).toBe(true);
      expect((error as Error).message).toContain(message);
    }
    expect(codeOf(() => defineState({ [SCHEMA_VERSION_KEY]: field() }))).toBe('INVALID_ARGUMENT');
  });

  it('migrateState runs the chain from the stored version, fills defaults and checks the result', () => {
    const V2 = defineState(
      {
        title: field({ schema: z.string().min(1) }),
        score: field<string>({ default: () => '0' }),
        tags: field<string[]>({ default: () => [] }),
      },
      {
        version: 2,
        migrations: [
          {
            from: 1,
            to: 2,
            schema: V1,
            migrate: ({ name, score, ...rest }) => ({ ...rest, title: name, score: String(score) }),
          },
        ],
      },
    );
    const stored = { name: 'stones', score: 3 };
    expect(migrateState(V2, stored, 1)).toEqual({ title: 'stones', score: '3', tags: [] });
    expect(stored).toEqual({ name: 'stones', score: 3 }); // the migration got a copy
    const same = { title: 'x', score: '1', tags: [] };
    expect(migrateState(V2, same, 2)).toBe(same);
    expect(codeOf(() => migrateState(V1, { name: 'x' }, 2))).toBe('SCHEMA_TOO_NEW');
    const Later = defineState(
      {},
      { version: 3, migrations: [{ from: 2, to: 3, migrate: (s) => s }] },
    );
    expect(codeOf(() => migrateState(Later, {}, 1))).toBe('INVALID_ARGUMENT');
    // A migration that leaves an old field, breaks a validator or returns no object.
    const leaves = defineState({ title: field<string>() }, { version: 2, migrations: [step] });
    expect(() => migrateState(leaves, { name: 'x' }, 1)).toThrow(
      'returned "name", which is not a thread field',
    );
    expect(codeOf(() => migrateState(V2, { name: '' }, 1))).toBe('INVALID_UPDATE');
    const nothing = defineState(
      {},
      { version: 2, migrations: [{ ...step, migrate: () => null as never }] },
    );
    expect(codeOf(() => migrateState(nothing, {}, 1))).toBe('INVALID_UPDATE');
  });
});
