import { MAX_NAME_LENGTH } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import { forkBranchName } from '../src/index.js';

describe('forkBranchName', () => {
  it('names a fork from its root, with the next number after the highest', () => {
    expect(forkBranchName('main', ['main'])).toBe('main-v2');
    expect(forkBranchName('main-v2', ['main', 'main-v2'])).toBe('main-v3');
    expect(forkBranchName('main', ['main', 'main-v2', 'main-v7'])).toBe('main-v8');
    // Names made by the old rule have the same root; their numbers are not counted.
    expect(forkBranchName('main-v2-v2', ['main', 'main-v2', 'main-v2-v2'])).toBe('main-v3');
    expect(forkBranchName('feature-x', ['main', 'feature-x', 'feature-x-v2b'])).toBe(
      'feature-x-v2',
    );
    // Only a fork number is stripped, and never the whole name.
    expect(forkBranchName('-v2', ['-v2'])).toBe('-v2-v2');
    // A number too long to count exactly is skipped, not incremented.
    expect(forkBranchName('main', ['main', `main-v${'9'.repeat(20)}`])).toBe('main-v2');
  });

  it('cuts a long root to fit, never inside a surrogate pair, and skips names taken', () => {
    const long = `${'b'.repeat(MAX_NAME_LENGTH - 4)}😀c`;
    const first = forkBranchName(long, [long]);
    expect(first).toBe(`${'b'.repeat(MAX_NAME_LENGTH - 4)}-v2`);
    const second = forkBranchName(long, [long, first]);
    expect(second).toBe(`${'b'.repeat(MAX_NAME_LENGTH - 4)}-v3`);
    const full = 'x'.repeat(MAX_NAME_LENGTH);
    const names = [full];
    for (let i = 0; i < 30; i++) names.push(forkBranchName(names.at(-1)!, names));
    expect(new Set(names).size).toBe(31);
    for (const name of names) expect(name.length).toBeLessThanOrEqual(MAX_NAME_LENGTH);
  });
});
