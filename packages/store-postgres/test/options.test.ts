import { describe, expect, it } from 'vitest';
import { createPostgresStore } from '../src/index.js';

/** Nothing listens here: a store that tried to connect would fail with UNAVAILABLE. */
const NOWHERE = 'postgres://postgres@127.0.0.1:1/none';

/** An INVALID_ARGUMENT error with this message (a string, or `expect.stringMatching`). */
const invalid = (message: unknown) =>
  expect.objectContaining({ code: 'INVALID_ARGUMENT', message });

describe('createPostgresStore: a misplaced or misspelled option is refused before connecting', () => {
  it('names an option given in the connection, and where it goes', async () => {
    await expect(async () =>
      createPostgresStore({ connectionString: NOWHERE, schema: 'tenant_a' } as never),
    ).rejects.toEqual(
      invalid(
        'createPostgresStore connection: unknown key "schema"; schema is an option: createPostgresStore(connection, { schema }), the second argument',
      ),
    );
    await expect(async () =>
      createPostgresStore({ connectionString: NOWHERE, ssl: true } as never),
    ).rejects.toEqual(
      invalid(
        `createPostgresStore connection: unknown key "ssl"; for pg's ssl, pass a pool: { pool: new pg.Pool({ ssl, … }) }`,
      ),
    );
    await expect(async () =>
      createPostgresStore({ connectionString: NOWHERE, client: {} } as never),
    ).rejects.toEqual(
      invalid(
        'createPostgresStore takes one of { connectionString }, { pool } or { client }, got connectionString and client',
      ),
    );
  });

  it('names a misspelled option, and one given where the connection goes', async () => {
    const connection = { connectionString: NOWHERE };
    for (const [options, message] of [
      [
        { schemaName: 'x' },
        'unknown key "schemaName"; expected one of schema, vectorSearch, maxConnections, encryption',
      ],
      [{ maxConections: 5 }, 'unknown key "maxConections" (did you mean "maxConnections"?)'],
      [{ vectorSerch: 'exact' }, 'unknown key "vectorSerch" (did you mean "vectorSearch"?)'],
      [
        { connectionString: NOWHERE },
        'unknown key "connectionString"; connectionString goes in the first argument: createPostgresStore({ connectionString })',
      ],
    ] as const) {
      await expect(async () => createPostgresStore(connection, options as never)).rejects.toEqual(
        invalid(`createPostgresStore options: ${message}`),
      );
    }
  });

  it('refuses an encryption option without a keyring, or with an unknown key', async () => {
    const connection = { connectionString: NOWHERE };
    await expect(async () =>
      createPostgresStore(connection, { encryption: { keyring: {} } } as never),
    ).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/keyring/),
    });
    await expect(async () =>
      createPostgresStore(connection, { encryption: { key: 'x' } } as never),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/"key"/) });
  });

  it('refuses maxConnections below 1, or with a pool or client it cannot size', async () => {
    await expect(async () =>
      createPostgresStore({ connectionString: NOWHERE }, { maxConnections: 0 }),
    ).rejects.toEqual(invalid('maxConnections must be an integer >= 1, got 0'));
    await expect(async () =>
      createPostgresStore({ client: {} as never }, { maxConnections: 4 }),
    ).rejects.toEqual(
      invalid(
        'maxConnections sizes the pool the store opens for { connectionString }; size your own pool or client instead',
      ),
    );
  });
});
