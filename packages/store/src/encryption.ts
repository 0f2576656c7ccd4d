/**
 * Encryption at rest: envelope encryption with a data key per tenant (AES-256-GCM from
 * Node's `crypto`), each data key wrapped by a key-encryption key the user supplies (a
 * `Keyring`). The front door seals values on their way to the driver and opens them on
 * their way back (see `sealingSession`); drivers store an envelope where they stored the
 * value and never see a key.
 */
import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createSecretKey,
  hkdfSync,
  type KeyObject,
  randomBytes,
  randomFillSync,
} from 'node:crypto';
import { CairnError, checkKeys, invalidArgument, keysOf } from '@cairn/core';

/**
 * What wraps and unwraps data keys: a key-encryption key (KEK) kept outside the store, in
 * a KMS or a secret the application holds. `context` names the tenant the data key is
 * for; bind it (a KMS encryption context, AEAD associated data) so that a wrapped key
 * copied to another tenant does not unwrap.
 *
 * @example
 * ```ts
 * // A KMS client fits the interface:
 * const keyring: Keyring = {
 *   keyId: 'arn:aws:kms:eu-west-1:111122223333:key/example',
 *   wrap: async (dataKey, context) => kmsEncrypt(dataKey, { tenant: context }),
 *   unwrap: async (wrapped, context) => kmsDecrypt(wrapped, { tenant: context }),
 * };
 * ```
 */
export interface Keyring {
  /** The KEK `wrap` uses; recorded with every data key it wraps. */
  readonly keyId: string;
  /** The data key wrapped for `context`. */
  wrap(dataKey: Uint8Array, context: string): Uint8Array | Promise<Uint8Array>;
  /**
   * The data key that `wrap(dataKey, context)` returned `wrapped` for, under the KEK
   * `keyId` (the current one, or an older one the keyring still holds). Throws when it
   * cannot: unknown KEK, wrong context, damaged bytes.
   */
  unwrap(wrapped: Uint8Array, context: string, keyId: string): Uint8Array | Promise<Uint8Array>;
}

/** The `encryption` option of a store: turns sealing on. */
export interface EncryptionOptions {
  /** Wraps each tenant's data key. */
  keyring: Keyring;
  /**
   * At most this many bytes (counted as characters of JSON and envelope text) of values
   * the store sealed or opened lately, kept in the process with the envelope they came
   * from, so that reading them again costs no decryption: a stored value opens from the
   * cache only if its envelope is that same text, read as the same row, and its tenant's
   * data key is still stored. Encryption at rest guards the disk and backups, not the
   * process's memory, which holds these values while it works with them anyway. Default
   * 32 MiB; 0 keeps none.
   */
  plaintextCacheBytes?: number;
  /**
   * At most this many memories a `searchMemories` call opens and scores in the process.
   * The store keeps no index of sealed text or vectors: a search reads the memories its
   * filter selects (of any number of tenants, each opened with its own data key), and a
   * filter that selects more is refused (`INVALID_ARGUMENT`) rather than reading them all,
   * so narrow it (`entityId`, `worldId`, `agentId`, `types`, ...). Default 10,000.
   */
  searchScanLimit?: number;
}

/** The default `plaintextCacheBytes`. */
export const PLAINTEXT_CACHE_BYTES = 32 * 2 ** 20;
/** The default `searchScanLimit`. */
export const SEARCH_SCAN_LIMIT = 10_000;

const ENCRYPTION_KEYS = keysOf<EncryptionOptions>()([
  'keyring',
  'plaintextCacheBytes',
  'searchScanLimit',
]);

/** `INVALID_ARGUMENT` unless `value` is a whole number, `min` or more, of `unit`. */
function checkWhole(value: unknown, name: string, unit: string, min: number): void {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min)
    throw invalidArgument(
      `encryption.${name} must be a whole number of ${unit}, ${min} or more, got ${JSON.stringify(value) ?? String(value)}`,
    );
}

/** `encryption` as given to a store factory, checked. */
export function checkEncryptionOptions(value: unknown): Required<EncryptionOptions> {
  checkKeys(value, 'encryption', ENCRYPTION_KEYS);
  const {
    keyring,
    plaintextCacheBytes = PLAINTEXT_CACHE_BYTES,
    searchScanLimit = SEARCH_SCAN_LIMIT,
  } = value as EncryptionOptions;
  checkWhole(plaintextCacheBytes, 'plaintextCacheBytes', 'bytes', 0);
  checkWhole(searchScanLimit, 'searchScanLimit', 'memories', 1);
  if (
    typeof keyring !== 'object' ||
    keyring === null ||
    typeof keyring.wrap !== 'function' ||
    typeof keyring.unwrap !== 'function' ||
    typeof keyring.keyId !== 'string' ||
    keyring.keyId.length === 0
  )
    throw invalidArgument(
      'encryption.keyring must be { keyId, wrap(dataKey, context), unwrap(wrapped, context, keyId) }, e.g. localKeyring(secret)',
    );
  return { keyring, plaintextCacheBytes, searchScanLimit };
}

/** A KEK of `localKeyring`: its id, derived from the key, and the key. */
interface LocalKek {
  id: string;
  key: Buffer;
}

function localKek(secret: string | Uint8Array, label: string): LocalKek {
  const bytes = typeof secret === 'string' ? Buffer.from(secret, 'utf8') : Buffer.from(secret);
  if (bytes.length < 32)
    throw invalidArgument(
      `${label} must be at least 32 bytes (e.g. randomBytes(32).toString('base64')), got ${bytes.length}`,
    );
  const key = Buffer.from(hkdfSync('sha256', bytes, 'cairn', 'cairn local keyring v1', 32));
  const id = `local:${createHash('sha256').update(key).digest('hex').slice(0, 16)}`;
  return { id, key };
}

/**
 * A keyring whose KEK is derived from a secret held by the application (at least 32
 * bytes): for tests and single-node use. Its `keyId` is derived from the secret, so a
 * store opened with another secret says so instead of failing obscurely. `previous`
 * secrets still unwrap what they wrapped (for a rotation, see `Store.rotateDataKeys`).
 *
 * @example
 * ```ts
 * import { localKeyring } from '@cairn/store';
 * const keyring = localKeyring(process.env.CAIRN_KEK!);
 * ```
 */
export function localKeyring(
  secret: string | Uint8Array,
  options: { previous?: Array<string | Uint8Array> } = {},
): Keyring {
  checkKeys(options, 'localKeyring options', ['previous']);
  const current = localKek(secret, 'the localKeyring secret');
  const keks = new Map([[current.id, current]]);
  for (const [i, s] of (options.previous ?? []).entries()) {
    const k = localKek(s, `previous[${i}]`);
    keks.set(k.id, k);
  }
  return {
    keyId: current.id,
    wrap(dataKey, context) {
      return Buffer.from(aeadSeal(current.key, Buffer.from(dataKey), context));
    },
    unwrap(wrapped, context, keyId) {
      const kek = keks.get(keyId);
      if (!kek)
        throw new CairnError(
          'DECRYPTION_FAILED',
          `data key wrapped by KEK ${JSON.stringify(keyId)}, which this keyring does not hold (it holds ${[...keks.keys()].map((k) => JSON.stringify(k)).join(', ')})`,
          { details: { keyId } },
        );
      const opened = aeadOpen(kek.key, Buffer.from(wrapped), context);
      if (!opened)
        throw new CairnError('DECRYPTION_FAILED', 'a wrapped data key did not unwrap', {
          details: { keyId, context },
        });
      return opened;
    },
  };
}

const IV_BYTES = 12;
const TAG_BYTES = 16;

/** Random bytes drawn 12 at a time for IVs: one call to the system's generator per 4 KB. */
const ivPool = Buffer.alloc(IV_BYTES * 341);
let ivAt = ivPool.length;

/** A random 96-bit IV, valid until the next call. */
function nextIv(): Buffer {
  if (ivAt + IV_BYTES > ivPool.length) {
    randomFillSync(ivPool);
    ivAt = 0;
  }
  ivAt += IV_BYTES;
  return ivPool.subarray(ivAt - IV_BYTES, ivAt);
}

/** `iv || ciphertext || tag` of `plain` under `key` (AES-256-GCM), bound to `aad`. */
function aeadSeal(key: Uint8Array | KeyObject, plain: Buffer, aad: string): Buffer {
  const iv = nextIv();
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(Buffer.from(aad, 'utf8'));
  return Buffer.concat([iv, c.update(plain), c.final(), c.getAuthTag()]);
}

/** The plaintext of `aeadSeal`'s output, or null when it does not authenticate. */
function aeadOpen(key: Uint8Array | KeyObject, sealed: Buffer, aad: string): Buffer | null {
  if (sealed.length < IV_BYTES + TAG_BYTES) return null;
  try {
    const d = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, IV_BYTES));
    d.setAAD(Buffer.from(aad, 'utf8'));
    d.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    const plain = d.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES));
    // GCM gives everything from update; final only checks the tag (and throws).
    d.final();
    return plain;
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------- tenants and envelopes

/**
 * Whose data key seals a row: a thread's rows are their thread's `resourceId`'s, a
 * memory's its `entityId`'s, else its `worldId`'s; rows with neither share the store's
 * tenant (`kind: 'store'`, key `''`).
 */
export type TenantKind = 'resource' | 'entity' | 'world' | 'store';

export interface Tenant {
  kind: TenantKind;
  key: string;
}

const TENANT_KINDS: readonly TenantKind[] = ['resource', 'entity', 'world', 'store'];

export const STORE_TENANT: Tenant = { kind: 'store', key: '' };

export const tenantName = (t: Tenant) => `${t.kind}:${t.key}`;

/** The property that marks a sealed value: `{ "$cairnSealed": "v1.…" }`. */
export const SEALED = '$cairnSealed';
const VERSION = 'v1';

/** A sealed value as stored: an object no caller's value is taken for by accident. */
export type Envelope = { [SEALED]: string; text?: '' };

/** Whether a stored value is an envelope (a sealed value), by its shape alone. */
export function isEnvelope(value: unknown): value is Envelope {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const s = (value as Record<string, unknown>)[SEALED];
  return typeof s === 'string' && s.startsWith(`${VERSION}.`);
}

/**
 * What every envelope of a tenant starts with (`v1.<kind>.<key, base64url>.`) and ends
 * its associated data with, worked out once per tenant rather than once per value.
 */
export interface TenantForm {
  tenant: Tenant;
  /** The tenant's name (`tenantName`). */
  name: string;
  /** The text before the sealed bytes of each of the tenant's envelopes. */
  prefix: string;
  /** The end of each of the tenant's values' associated data (see `aadText`). */
  aadTail: string;
}

export function tenantForm(tenant: Tenant): TenantForm {
  return {
    tenant,
    name: tenantName(tenant),
    prefix: `${VERSION}.${tenant.kind}.${Buffer.from(tenant.key, 'utf8').toString('base64url')}.`,
    aadTail: `,${JSON.stringify(tenant.kind)},${JSON.stringify(tenant.key)}]`,
  };
}

/**
 * The tenant an envelope's text names, and where its sealed bytes start; null when it is
 * not one this code wrote. `v1.<kind>.<key>.<sealed bytes>`, base64url between the dots.
 */
export function envelopeTenant(sealed: string): Tenant | null {
  const a = sealed.indexOf('.');
  const b = sealed.indexOf('.', a + 1);
  const c = b < 0 ? -1 : sealed.indexOf('.', b + 1);
  if (c < 0 || sealed.slice(0, a) !== VERSION || sealed.indexOf('.', c + 1) >= 0) return null;
  const kind = sealed.slice(a + 1, b) as TenantKind;
  if (!TENANT_KINDS.includes(kind)) return null;
  return { kind, key: Buffer.from(sealed.slice(b + 1, c), 'base64url').toString('utf8') };
}

/**
 * The associated data of a value: `["cairn","v1",...identity,kind,key]` as JSON, so that a
 * value opens only as the row (kind and ids) and tenant it was sealed for.
 */
function aadText(identity: readonly (string | number)[], form: TenantForm): string {
  let s = `["cairn","${VERSION}"`;
  for (const part of identity) s += `,${JSON.stringify(part)}`;
  return s + form.aadTail;
}

/**
 * Scratch bytes for one seal or open at a time (each runs to its end without a wait):
 * the associated data, the plaintext and the sealed bytes are written here rather than
 * into a new buffer each. A value larger than `SCRATCH_MAX` gets buffers of its own.
 */
const SCRATCH_MAX = 1 << 20;
let scratch = Buffer.allocUnsafe(1 << 14);

function scratchFor(bytes: number): Buffer {
  if (bytes <= scratch.length) return scratch;
  if (bytes > SCRATCH_MAX) return Buffer.allocUnsafe(bytes);
  scratch = Buffer.allocUnsafe(Math.min(SCRATCH_MAX, 2 ** Math.ceil(Math.log2(bytes))));
  return scratch;
}

/**
 * The envelope text of `json` (a value's JSON) sealed under the tenant's data key, bound
 * to `identity` (the row's kind and ids) and the tenant: opened anywhere else (another
 * row, another tenant) it fails. A random 96-bit IV per value.
 */
export function sealText(
  dataKey: KeyObject,
  form: TenantForm,
  identity: readonly (string | number)[],
  json: string,
): string {
  const aad = aadText(identity, form);
  // Room for the associated data, then the plaintext, then IV || ciphertext || tag.
  const aadMax = aad.length * 3;
  const plainMax = json.length * 3;
  const buf = scratchFor(aadMax + plainMax * 2 + IV_BYTES + TAG_BYTES);
  const aadLen = buf.write(aad, 0, aadMax, 'utf8');
  const plainLen = buf.write(json, aadMax, plainMax, 'utf8');
  const iv = nextIv();
  const c = createCipheriv('aes-256-gcm', dataKey, iv);
  c.setAAD(buf.subarray(0, aadLen));
  const out = aadMax + plainMax;
  iv.copy(buf, out);
  // GCM gives every byte from update; final only completes the tag.
  const n = c.update(buf.subarray(aadMax, aadMax + plainLen)).copy(buf, out + IV_BYTES);
  c.final();
  c.getAuthTag().copy(buf, out + IV_BYTES + n);
  return form.prefix + buf.toString('base64url', out, out + IV_BYTES + n + TAG_BYTES);
}

/**
 * The JSON that `sealText` sealed into `sealed` (an envelope of the form's tenant), or null
 * when it does not open with this key and identity.
 */
export function openText(
  dataKey: KeyObject,
  form: TenantForm,
  identity: readonly (string | number)[],
  sealed: string,
): string | null {
  if (!sealed.startsWith(form.prefix)) return null;
  const aad = aadText(identity, form);
  const aadMax = aad.length * 3;
  const bodyChars = sealed.length - form.prefix.length;
  // base64url: 3 bytes per 4 characters.
  const buf = scratchFor(aadMax + Math.ceil((bodyChars * 3) / 4));
  const aadLen = buf.write(aad, 0, aadMax, 'utf8');
  const bodyLen = buf.write(sealed.slice(form.prefix.length), aadMax, 'base64url');
  if (bodyLen < IV_BYTES + TAG_BYTES) return null;
  const end = aadMax + bodyLen;
  try {
    const d = createDecipheriv('aes-256-gcm', dataKey, buf.subarray(aadMax, aadMax + IV_BYTES));
    d.setAAD(buf.subarray(0, aadLen));
    d.setAuthTag(buf.subarray(end - TAG_BYTES, end));
    const plain = d.update(buf.subarray(aadMax + IV_BYTES, end - TAG_BYTES));
    // GCM gives everything from update; final only checks the tag (and throws).
    d.final();
    return plain.toString('utf8');
  } catch {
    return null;
  }
}

/** The context a tenant's data key is wrapped for. */
export const wrapContext = (t: Tenant) => `cairn data key ${tenantName(t)}`;

/** A new random data key, its bytes (to wrap) and its key object (to seal with). */
export function newDataKey(): { bytes: Buffer; key: KeyObject } {
  const bytes = randomBytes(32);
  return { bytes, key: createSecretKey(bytes) };
}

/** A data key's bytes as a key object: Node's ciphers set up faster from one. */
export const dataKeyObject = (bytes: Uint8Array): KeyObject => {
  if (bytes.length !== 32)
    throw new CairnError('DECRYPTION_FAILED', `a data key must be 32 bytes, got ${bytes.length}`);
  return createSecretKey(bytes);
};
