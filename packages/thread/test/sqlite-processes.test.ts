import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '@cairn/store-sqlite';
import { expect, it } from 'vitest';
import { appendFromProcesses } from './processes.js';

it('4 processes x 250 appendUnique updates on one SQLite file: all 1,000 items present', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-thread-mp-'));
  const path = join(dir, 'shared.db');
  const store = createSqliteStore({ path });
  try {
    const { items, versions } = await appendFromProcesses(
      store,
      { kind: 'sqlite', target: path },
      4,
      250,
    );
    expect(items).toHaveLength(1000);
    const expected = [0, 1, 2, 3].flatMap((w) =>
      Array.from({ length: 250 }, (_, i) => `w${w}-${i}`),
    );
    expect([...items].sort()).toEqual([...expected].sort());
    // each process's items in its own call order
    for (let w = 0; w < 4; w++) {
      const mine = items.filter((x) => x.startsWith(`w${w}-`));
      expect(mine).toEqual(Array.from({ length: 250 }, (_, i) => `w${w}-${i}`));
    }
    expect(versions).toEqual(Array.from({ length: 1000 }, (_, i) => i + 1));
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
