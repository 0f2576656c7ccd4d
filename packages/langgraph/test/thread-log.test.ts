// Every walk up a checkpoint's parents in a namespace's log ends: a log with a cycle is an
// error, and a record an earlier release wrote for a checkpoint put again under its own id
// (its own parent, no values) is read as the update in place it was.
import { isCairnError } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import {
  type CheckpointRecord,
  NamespaceLog,
  tailCovers,
  type WritesRecord,
} from '../src/thread-log.js';

const header = ['json', { v: 4, channel_versions: { a: 1, b: 2 } }] as CheckpointRecord['header'];

function record(
  id: string,
  parent: string | null,
  vals: CheckpointRecord['vals'],
): CheckpointRecord {
  return { lg: 'checkpoint', id, parent, header, meta: ['json', {}], vals, top: 1 };
}

describe('NamespaceLog', () => {
  it('reads an earlier release’s record of a checkpoint put again as an update in place', () => {
    const log = new NamespaceLog('', 'b', null);
    log.fold(1, record('1', null, [['a', 1, ['json', 'x']]]));
    log.fold(2, record('2', '1', [['b', 2, ['json', 'y']]]));
    log.fold(3, record('2', '2', []));
    expect(log.checkpoints.get('2')!.parent).toBe('1');
    expect(Object.fromEntries([...log.resolve('2')].map(([c, r]) => [c, r.r]))).toEqual({
      a: ['json', 'x'],
      b: ['json', 'y'],
    });
  });

  it('throws INVALID_UPDATE on a cycle instead of walking it forever', () => {
    const log = new NamespaceLog('ns', 'b', null);
    log.fold(1, record('1', '2', [['a', 1, ['json', 'x']]]));
    log.fold(2, record('2', '1', [['b', 2, ['json', 'y']]]));
    const cycle = (fn: () => unknown) => {
      try {
        fn();
      } catch (e) {
        return isCairnError(e, 'INVALID_UPDATE') && /cycle/.test((e as Error).message);
      }
      return false;
    };
    expect(cycle(() => log.resolve('2'))).toBe(true);
    expect(cycle(() => [...log.ancestry('2')])).toBe(true);
  });
});

describe('a commit of several records (BatchRecord)', () => {
  const writes: WritesRecord = {
    lg: 'writes',
    cp: '1',
    task: 't',
    path: '',
    items: [[0, 'b', ['json', 'w']]],
  };
  const second = record('2', '1', [['b', 2, ['json', 'y']]]);

  it('folds as its records folded one by one, in order, at its version', () => {
    const batched = new NamespaceLog('', 'b', null);
    batched.fold(1, record('1', null, [['a', 1, ['json', 'x']]]));
    batched.fold(2, { lg: 'batch', records: [writes, second] });
    expect(batched.version).toBe(2);
    expect(batched.latest).toBe('2');
    expect(batched.writes('1').map((w) => w.value)).toEqual([['json', 'w']]);
    expect(batched.firstWrites('1')).toBe(2);
    expect(Object.fromEntries([...batched.resolve('2')].map(([c, r]) => [c, r.r]))).toEqual({
      a: ['json', 'x'],
      b: ['json', 'y'],
    });
  });

  it('is read by tailCovers, its newest record first', () => {
    const commits = [
      { version: 2, update: { lg: 'batch', records: [writes, second] } },
      { version: 1, update: record('1', null, [['a', 1, ['json', 'x']]]) },
    ];
    expect(tailCovers(commits.slice(0, 1), 2, undefined)).toBe('more');
    expect(tailCovers(commits, 1, undefined)).toEqual({ id: '2' });
  });
});

describe('tailCovers', () => {
  it('reads the whole log when the tail has a checkpoint that is its own parent', () => {
    const commits = [
      { version: 3, update: record('2', '2', []) },
      { version: 2, update: record('2', '1', [['b', 2, ['json', 'y']]]) },
      { version: 1, update: record('1', null, [['a', 1, ['json', 'x']]]) },
    ];
    expect(tailCovers(commits, 1, undefined)).toBe('all');
  });

  it('reads the whole log when the tail’s parents go round in a cycle', () => {
    const commits = [
      { version: 2, update: record('2', '1', [['b', 2, ['json', 'y']]]) },
      { version: 1, update: record('1', '2', []) },
    ];
    expect(tailCovers(commits, 1, '2')).toBe('all');
  });
});
