import { checkKeys, invalidArgument, keysOf } from '@cairn/core';
import { checkStore } from '@cairn/store/adapter';
import type { InspectorOptions } from './server.js';

const KEYS = keysOf<InspectorOptions>()([
  'store',
  'port',
  'host',
  'accessToken',
  'allowWrites',
  'embedder',
  'schema',
  'viewerFor',
  'title',
]);

/**
 * `startInspector`'s options, checked before anything listens: `INVALID_ARGUMENT` naming an
 * unknown key or a value of the wrong type, never a `RangeError` from `listen` or a lookup
 * of a host name with a space in it.
 */
export function checkInspectorOptions(options: InspectorOptions): void {
  checkKeys(options, 'startInspector options', KEYS, {
    readOnly: 'the inspector is read-only unless allowWrites is true',
  });
  checkStore(options.store, 'startInspector: store');
  const { port, host, accessToken, allowWrites, embedder, schema, viewerFor, title } = options;
  const fail = (key: string, what: string, value: unknown) => {
    throw invalidArgument(
      `startInspector: ${key} must be ${what}, got ${typeof value === 'string' ? JSON.stringify(value) : String(value)}`,
      { field: key },
    );
  };
  if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port <= 65_535))
    fail('port', 'an integer from 0 to 65535 (0: any free port)', port);
  if (host !== undefined && !(typeof host === 'string' && /^[^\s/]+$/.test(host)))
    fail('host', 'a host name or IP address, without spaces', host);
  if (
    accessToken !== undefined &&
    !(typeof accessToken === 'string' && /^[A-Za-z0-9._~-]{16,200}$/.test(accessToken))
  )
    // The value is a secret: not repeated in the message.
    throw invalidArgument(
      `startInspector: accessToken must be 16 to 200 characters of A-Z a-z 0-9 . _ ~ - (got ${typeof accessToken === 'string' ? `${accessToken.length} characters` : typeof accessToken})`,
      { field: 'accessToken' },
    );
  if (allowWrites !== undefined && typeof allowWrites !== 'boolean')
    fail('allowWrites', 'true or false', allowWrites);
  if (embedder !== undefined && typeof embedder?.embed !== 'function')
    fail('embedder', 'an Embedder (with an embed function)', embedder);
  if (schema !== undefined && typeof schema?.initial !== 'function')
    fail('schema', 'a schema made with defineState', schema);
  if (viewerFor !== undefined && typeof viewerFor !== 'function')
    fail('viewerFor', 'a function (threadId) => viewer', viewerFor);
  if (title !== undefined && typeof title !== 'string') fail('title', 'a string', title);
}
