import { isCairnError } from '@cairn/core';
import { createMemoryStore } from '@cairn/store';
import { describe, expect, it } from 'vitest';
import { startInspector } from '../src/index.js';

/** The INVALID_ARGUMENT message of a start that must not listen. */
async function refusal(options: object): Promise<string> {
  const started = await startInspector(options as never).then(
    async (inspector) => {
      await inspector.close();
      return null;
    },
    (e: unknown) => e,
  );
  expect(isCairnError(started, 'INVALID_ARGUMENT'), String(started)).toBe(true);
  return (started as Error).message;
}

describe('startInspector: an unknown key or a bad value is INVALID_ARGUMENT before it listens', () => {
  const store = createMemoryStore();

  it('names a misspelled or misplaced option', async () => {
    expect(await refusal({ store, port: 0, allowwrites: true })).toBe(
      'startInspector options: unknown key "allowwrites" (did you mean "allowWrites"?)',
    );
    expect(await refusal({ store, port: 0, readOnly: false })).toBe(
      'startInspector options: unknown key "readOnly"; the inspector is read-only unless allowWrites is true',
    );
  });

  it('refuses a value of the wrong type: no RangeError, no host lookup, no string for a boolean', async () => {
    for (const [options, message] of [
      [{ port: -1 }, 'port must be an integer from 0 to 65535 (0: any free port), got -1'],
      [
        { port: 0, host: 'localhost ' },
        'host must be a host name or IP address, without spaces, got "localhost "',
      ],
      [{ port: 0, allowWrites: 'false' }, 'allowWrites must be true or false, got "false"'],
      [
        { port: 0, viewerFor: 'agent' },
        'viewerFor must be a function (threadId) => viewer, got "agent"',
      ],
    ] as const) {
      expect(await refusal({ store, ...options })).toBe(`startInspector: ${message}`);
    }
    expect(await refusal({ store: { store }, port: 0 })).toBe(
      'startInspector: store must be a Cairn Store, got an object holding one ({ store }); pass the store itself',
    );
  });

  it("an address that is not this machine's is INVALID_ARGUMENT, not EADDRNOTAVAIL", async () => {
    // 192.0.2.1 is TEST-NET-1 (RFC 5737): never a local address, and no name to look up.
    expect(await refusal({ store, port: 0, host: '192.0.2.1' })).toBe(
      'cannot listen on 192.0.2.1: it is not an address of this machine (EADDRNOTAVAIL)',
    );
  });
});
