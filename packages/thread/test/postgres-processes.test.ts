import { createPostgresStore } from '@cairn/store-postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { dropSchema, freshSchema, POSTGRES_URL, SKIP_SERVER } from './postgres-support.js';
import { appendFromProcesses } from './processes.js';

const schema = freshSchema();

describe.skipIf(Boolean(SKIP_SERVER))('on the Postgres server', () => {
  afterAll(async () => {
    await dropSchema(schema);
  });

  it('4 processes x 250 appendUnique updates on one thread: all 1,000 items present', async () => {
    const store = await createPostgresStore({ connectionString: POSTGRES_URL }, { schema });
    try {
      const { items, versions } = await appendFromProcesses(
        store,
        { kind: 'postgres', target: POSTGRES_URL, schema },
        4,
        250,
      );
      expect(items).toHaveLength(1000);
      for (let w = 0; w < 4; w++) {
        expect(items.filter((x) => x.startsWith(`w${w}-`))).toEqual(
          Array.from({ length: 250 }, (_, i) => `w${w}-${i}`),
        );
      }
      expect(versions).toEqual(Array.from({ length: 1000 }, (_, i) => i + 1));
    } finally {
      await store.close();
    }
  }, 180_000);
});
