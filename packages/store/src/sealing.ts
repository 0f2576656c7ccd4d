/**
 * The one place values are sealed and opened: a `DriverSession` wrapped by the front
 * door, so that every driver stores an envelope where it stored the value (see
 * `encryption.ts`) and hands it back to be opened here.
 */

import type { KeyObject } from 'node:crypto';
import {
  CairnError,
  invalidArgument,
  type JsonObject,
  type JsonValue,
  type Memory,
  type MemoryContent,
  type Message,
  notFound,
  type StateCommit,
} from '@cairn/core';
import type { DataKeyRow, DriverSession, StateCommitDraft, TombstoneKind } from './driver.js';
import {
  dataKeyObject,
  type Envelope,
  envelopeTenant,
  isEnvelope,
  type Keyring,
  newDataKey,
  openText,
  SEALED,
  STORE_TENANT,
  sealText,
  type Tenant,
  type TenantForm,
  tenantForm,
  tenantName,
  wrapContext,
} from './encryption.js';
import { forgotten } from './failures.js';
import type { MemoryFilter } from './store.js';

/** Unwrapped data keys kept by a store, at most: the KEK is asked once per key while it stays. */
const UNWRAPPED_CACHE = 10_000;
/** Tenants whose envelope prefixes a store keeps worked out, at most. */
const FORMS_CACHE = 10_000;

/** A value a store opened: the cache entry of its envelope's text. */
interface Opened {
  /** The envelope's text. */
  text: string;
  /** The data key it opens with: an entry of a key no longer in use is not used. */
  key: KeyObject;
  /** The row it was sealed for. */
  identity: readonly (string | number)[];
  /** The tenant's name, to drop the entry when the tenant's keys are destroyed. */
  tenant: string;
  json: string;
}

/**
 * Where an envelope's text is filed: its last characters, of its random authentication
 * tag. Hashing these rather than the whole text (a fresh string per read) halves a hit's
 * cost; a hit still compares the whole text.
 */
const fileOf = (text: string) => text.slice(-16);

/**
 * Values opened lately, by their envelope's text, in two generations: a new entry goes
 * into the young one, an old one read again moves back to it, and when the young one
 * holds half the budget it becomes the old one (the old one is dropped). Nearly LRU, at a
 * map lookup per read.
 */
class OpenedCache {
  #young = new Map<string, Opened>();
  #old = new Map<string, Opened>();
  #bytes = 0;

  constructor(readonly budget: number) {}

  get(text: string): Opened | undefined {
    const file = fileOf(text);
    const young = this.#young.get(file);
    if (young) return young.text === text ? young : undefined;
    const old = this.#old.get(file);
    if (old?.text !== text) return undefined;
    this.set(old);
    return old;
  }

  set(opened: Opened): void {
    if (this.budget === 0) return;
    this.#young.set(fileOf(opened.text), opened);
    this.#bytes += opened.text.length + opened.json.length + 64;
    if (this.#bytes * 2 > this.budget) {
      this.#old = this.#young;
      this.#young = new Map();
      this.#bytes = 0;
    }
  }

  drop(tenants: ReadonlySet<string>): void {
    for (const m of [this.#young, this.#old])
      for (const [file, o] of m) if (tenants.has(o.tenant)) m.delete(file);
  }
}

const sameIdentity = (a: readonly (string | number)[], b: readonly (string | number)[]) => {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
};

/** A store's keyring, the data keys it unwrapped and the values it opened lately. */
export class Sealer {
  readonly #unwrapped = new Map<string, { tenant: string; key: Promise<KeyObject> }>();
  readonly #forms = new Map<string, TenantForm>();
  #lastForm: TenantForm | null = null;
  readonly #opened: OpenedCache;

  constructor(
    readonly keyring: Keyring,
    plaintextCacheBytes: number,
    /** At most this many memories a search opens and scores (`EncryptionOptions`). */
    readonly searchScanLimit: number,
  ) {
    this.#opened = new OpenedCache(plaintextCacheBytes);
  }

  /** The data key of a stored row, unwrapped by the keyring (once per wrapped key). */
  unwrap(row: DataKeyRow): Promise<KeyObject> {
    const id = `${row.keyId}\u0000${row.wrapped}`;
    const known = this.#unwrapped.get(id);
    if (known) {
      // Most recently used last: the first entry is the one to drop.
      this.#unwrapped.delete(id);
      this.#unwrapped.set(id, known);
      return known.key;
    }
    const tenant = { kind: row.kind, key: row.key };
    const key = Promise.resolve()
      .then(() =>
        this.keyring.unwrap(Buffer.from(row.wrapped, 'base64'), wrapContext(tenant), row.keyId),
      )
      .then(
        (k) => dataKeyObject(k),
        (e: unknown) => {
          this.#unwrapped.delete(id);
          throw new CairnError(
            'DECRYPTION_FAILED',
            `the data key of ${tenantName(tenant)} did not unwrap with this keyring (KEK ${JSON.stringify(row.keyId)})`,
            { cause: e, details: { tenant: tenantName(tenant), keyId: row.keyId } },
          );
        },
      );
    this.#remember(row, key);
    return key;
  }

  #remember(row: DataKeyRow, key: Promise<KeyObject>): void {
    this.#unwrapped.set(`${row.keyId}\u0000${row.wrapped}`, { tenant: tenantName(row), key });
    if (this.#unwrapped.size > UNWRAPPED_CACHE)
      this.#unwrapped.delete(this.#unwrapped.keys().next().value!);
  }

  /** The row of a stored data key wrapped again by the keyring's current KEK. */
  async rewrap(row: DataKeyRow): Promise<DataKeyRow> {
    const key = (await this.unwrap(row)).export();
    const wrapped = await this.keyring.wrap(key, wrapContext({ kind: row.kind, key: row.key }));
    return { ...row, keyId: this.keyring.keyId, wrapped: Buffer.from(wrapped).toString('base64') };
  }

  /** A new data key for the tenant and its row, wrapped by the keyring's current KEK. */
  async create(tenant: Tenant, now: number): Promise<{ key: KeyObject; row: DataKeyRow }> {
    const { bytes, key } = newDataKey();
    const wrapped = Buffer.from(await this.keyring.wrap(bytes, wrapContext(tenant)));
    const row = {
      ...tenant,
      keyId: this.keyring.keyId,
      wrapped: wrapped.toString('base64'),
      createdAt: now,
    };
    // Read back later, the row unwraps to this same key object (what `open` checks).
    this.#remember(row, Promise.resolve(key));
    return { key, row };
  }

  /** Forgets what this process holds of these tenants: their unwrapped keys and opened values. */
  drop(tenants: readonly Tenant[]): void {
    const names = new Set(tenants.map(tenantName));
    for (const [id, k] of this.#unwrapped) if (names.has(k.tenant)) this.#unwrapped.delete(id);
    this.#opened.drop(names);
  }

  /** The tenant's envelope prefix and associated data tail. */
  form(tenant: Tenant): TenantForm {
    const name = tenantName(tenant);
    let f = this.#forms.get(name);
    if (!f) {
      if (this.#forms.size >= FORMS_CACHE) this.#forms.clear();
      f = tenantForm(tenant);
      this.#forms.set(name, f);
    }
    return f;
  }

  /** The form of the tenant an envelope's text names, or null when it is not an envelope. */
  formOf(text: string): TenantForm | null {
    // A chain's values are mostly of one tenant: check the last one's prefix first.
    // Its prefix alone: a text with more after it than sealed bytes does not open.
    const last = this.#lastForm;
    if (last && text.startsWith(last.prefix)) return last;
    const tenant = envelopeTenant(text);
    if (!tenant) return null;
    this.#lastForm = this.form(tenant);
    return this.#lastForm;
  }

  /** `value` sealed for the row `identity` under the tenant's data key: an envelope's text. */
  seal(
    key: KeyObject,
    form: TenantForm,
    identity: readonly (string | number)[],
    value: JsonValue,
  ): string {
    // Not kept as opened: what a write keeps alive costs every write a GC copy or two, and
    // a value is read again far less often than it is written.
    return sealText(key, form, identity, JSON.stringify(value));
  }

  /**
   * The value of an envelope's text this store opened lately as the row `identity`, and its
   * tenant's name, while `keyOf(tenant)` is still the key it opened with; else undefined.
   * No decryption, nor any parsing of the envelope.
   */
  reopen(
    text: string,
    identity: readonly (string | number)[],
    keyOf: (tenant: string) => KeyObject | undefined,
  ): { tenant: string; value: JsonValue } | undefined {
    const known = this.#opened.get(text);
    if (!known || keyOf(known.tenant) !== known.key || !sameIdentity(known.identity, identity))
      return undefined;
    return { tenant: known.tenant, value: JSON.parse(known.json) as JsonValue };
  }

  /** The value an envelope's text holds, opened as the row `identity`; undefined when it does not open. */
  open(
    key: KeyObject,
    form: TenantForm,
    identity: readonly (string | number)[],
    text: string,
  ): JsonValue | undefined {
    const json = openText(key, form, identity, text);
    if (json === null) return undefined;
    this.#opened.set({ text, key, identity, tenant: form.name, json });
    return JSON.parse(json) as JsonValue;
  }
}

/** The tenant whose data key seals a thread's rows. */
export const threadTenant = (resourceId: string | null): Tenant =>
  resourceId === null ? STORE_TENANT : { kind: 'resource', key: resourceId };

/** The tenant whose data key seals a memory. */
export const memoryTenant = (m: Pick<Memory, 'entityId' | 'worldId'>): Tenant =>
  m.entityId !== null
    ? { kind: 'entity', key: m.entityId }
    : m.worldId !== null
      ? { kind: 'world', key: m.worldId }
      : STORE_TENANT;

/** `DECRYPTION_FAILED` for a stored value that does not open. */
function undecryptable(what: string, id: string, why: string, details = {}): CairnError {
  return new CairnError('DECRYPTION_FAILED', `${what} ${JSON.stringify(id)} ${why}`, {
    details: { kind: what, id, ...details },
  });
}

/** `INVALID_ARGUMENT`: what a store that seals memory text cannot do. */
export function sealedRefusal(what: string): CairnError {
  return invalidArgument(
    `${what} on a store with encryption: memory text, metadata and vectors are sealed, and the store keeps no index of them`,
    { encryption: true },
  );
}

/**
 * Where a sealed memory's embedding is stored: in the object stored as its content, next
 * to the sealed content, as an envelope's text of its own (bound to the memory and its
 * tenant). The driver gets no embedding, so it indexes no vector.
 */
const SEALED_EMBEDDING = '$cairnSealedEmbedding';

/** Whether a memory, as its driver stores it (sealed or not), has an embedding. */
export const storesEmbedding = (m: Memory): boolean =>
  m.embedding !== null || (isEnvelope(m.content) && SEALED_EMBEDDING in m.content);

/** Why a row's value was refused: a plaintext value where a sealed one is expected. */
const NOT_SEALED =
  'is not sealed: this store seals every value it writes, and refuses one written around it';
/** Why a row's value was refused by a store opened without a keyring. */
const NO_KEYRING = 'is sealed: open the store with encryption: { keyring }';
const DID_NOT_OPEN =
  'did not open: it was edited, or moved from another row or tenant, or sealed by another key';

/**
 * A session that seals values before the driver writes them and opens them after it
 * reads them (with a `Sealer`), or, without one, refuses sealed values it reads (a store
 * opened without its keyring). Other calls pass through.
 */
export function sealingSession(
  s: DriverSession,
  sealer: Sealer | null,
  now: () => number,
): DriverSession {
  const over = sealer ? new SealedCalls(s, sealer, now) : new PlainCalls(s);
  const bound = new Map<PropertyKey, unknown>();
  return new Proxy(s, {
    get(target, prop) {
      let f = bound.get(prop);
      if (f !== undefined) return f;
      const own = (target as unknown as Record<PropertyKey, unknown>)[prop];
      // An optional method the driver does not have stays absent.
      if (typeof own !== 'function') return own;
      const mine = (over as unknown as Record<PropertyKey, unknown>)[prop];
      f = typeof mine === 'function' && prop !== 'constructor' ? mine.bind(over) : own.bind(target);
      bound.set(prop, f);
      return f;
    },
  });
}

/** What a store opened without a keyring does: refuses every sealed value it reads. */
class PlainCalls {
  constructor(readonly s: DriverSession) {}

  #message(m: Message | null): Message | null {
    if (m && isEnvelope(m.data)) throw undecryptable('message', m.id, NO_KEYRING);
    return m;
  }
  #commit(c: StateCommit | null): StateCommit | null {
    if (c && (isEnvelope(c.update) || isEnvelope(c.snapshot)))
      throw undecryptable('state commit', `${c.branchId}@${c.version}`, NO_KEYRING);
    return c;
  }
  #memory(m: Memory | null): Memory | null {
    if (m && (isEnvelope(m.content) || isEnvelope(m.metadata)))
      throw undecryptable('memory', m.id, NO_KEYRING);
    return m;
  }

  async getMessage(id: string) {
    return this.#message(await this.s.getMessage(id));
  }
  async listMessages(threadId: string) {
    return (await this.s.listMessages(threadId)).map((m) => this.#message(m)!);
  }
  async getChain(headId: string, minDepth: number, maxDepth: number) {
    return (await this.s.getChain(headId, minDepth, maxDepth)).map((m) => this.#message(m)!);
  }
  async getStateCommits(branchId: string, from: number, to: number) {
    return (await this.s.getStateCommits(branchId, from, to)).map((c) => this.#commit(c)!);
  }
  async getLatestStateCommit(...a: Parameters<DriverSession['getLatestStateCommit']>) {
    return this.#commit(await this.s.getLatestStateCommit(...a));
  }
  async getLatestStateCommits(
    ...a: Parameters<NonNullable<DriverSession['getLatestStateCommits']>>
  ) {
    return (await this.s.getLatestStateCommits!(...a)).map((c) => this.#commit(c));
  }
  async sweepFacts(...a: Parameters<NonNullable<DriverSession['sweepFacts']>>) {
    const facts = await this.s.sweepFacts!(...a);
    for (const m of facts.messages) this.#message(m);
    return facts;
  }
  async getMemory(id: string) {
    return this.#memory(await this.s.getMemory(id));
  }
  async listMemories(...a: Parameters<DriverSession['listMemories']>) {
    return (await this.s.listMemories(...a)).map((m) => this.#memory(m)!);
  }
  async scanMemories(after: string | null, limit: number) {
    return (await this.s.scanMemories(after, limit)).map((m) => this.#memory(m)!);
  }
  async vectorCandidates(...a: Parameters<DriverSession['vectorCandidates']>) {
    const rows = await this.s.vectorCandidates(...a);
    for (const r of rows) this.#memory(r.memory);
    return rows;
  }
  async keywordCandidates(...a: Parameters<DriverSession['keywordCandidates']>) {
    const rows = await this.s.keywordCandidates(...a);
    for (const r of rows) this.#memory(r.memory);
    return rows;
  }
}

/** What a store with a keyring does: seals on the way in, opens on the way out. */
class SealedCalls {
  /** Data keys this session found or made, by tenant name. */
  readonly #keys = new Map<string, KeyObject>();
  /** Tenants of the threads this session looked up. */
  readonly #threads = new Map<string, Tenant>();
  readonly #keyOf = (tenant: string) => this.#keys.get(tenant);

  constructor(
    readonly s: DriverSession,
    readonly sealer: Sealer,
    readonly now: () => number,
  ) {}

  // ------------------------------------------------------------ keys

  /**
   * The tenant's data key: stored, or (with `create`) made and stored in this session.
   * `DECRYPTION_FAILED` when it has none to read with (never made, or destroyed).
   */
  async #dataKey(tenant: Tenant, create: boolean): Promise<KeyObject> {
    const name = tenantName(tenant);
    const known = this.#keys.get(name);
    if (known) return known;
    let [row] = await this.s.getDataKeys([tenant]);
    if (!row) {
      if (!create)
        throw new CairnError(
          'DECRYPTION_FAILED',
          `the data key of ${name} is gone (destroyed by forget, or never stored): its data cannot be read`,
          { details: { tenant: name } },
        );
      if (tenant.kind !== 'store') {
        // A forgotten subject gets no new key: its late writes are refused.
        const subject = { kind: tenant.kind as TombstoneKind, key: tenant.key };
        if (this.s.lockSubjects) await this.s.lockSubjects([subject], false);
        const [t] = await this.s.findTombstones([subject]);
        if (t) throw forgotten(t);
      }
      const made = await this.sealer.create(tenant, this.now());
      if (await this.s.insertDataKey(made.row)) {
        this.#keys.set(name, made.key);
        return made.key;
      }
      // Another session stored the tenant's first key meanwhile: use that one.
      [row] = await this.s.getDataKeys([tenant]);
      if (!row) throw new CairnError('CONFLICT', `the data key of ${name} changed meanwhile`);
    }
    const key = await this.sealer.unwrap(row);
    this.#keys.set(name, key);
    return key;
  }

  async #threadTenant(threadId: string): Promise<Tenant> {
    let t = this.#threads.get(threadId);
    if (!t) {
      const thread = await this.s.getThread(threadId);
      if (!thread) throw notFound('thread', threadId);
      t = threadTenant(thread.resourceId);
      this.#threads.set(threadId, t);
    }
    return t;
  }

  async #seal(
    tenant: Tenant,
    identity: readonly (string | number)[],
    value: JsonValue,
  ): Promise<Envelope> {
    const key = await this.#dataKey(tenant, true);
    return { [SEALED]: this.sealer.seal(key, this.sealer.form(tenant), identity, value) };
  }

  /**
   * Finds the data keys of the tenants these stored values name, so that `#open` needs no
   * wait: one lookup per tenant, not per row. A value that names none is left to `#open`.
   */
  async #keysFor(values: unknown[]): Promise<void> {
    let last: TenantForm | null = null;
    for (const v of values) {
      if (!isEnvelope(v)) continue;
      const form = this.sealer.formOf(v[SEALED]);
      if (!form || form === last) continue;
      last = form;
      if (!this.#keys.has(form.name)) await this.#dataKey(form.tenant, false);
    }
  }

  /**
   * The sealed value, opened, once `#keysFor` found its key; `expected` is the tenant the
   * row says it is of, when it says.
   */
  #open(
    what: string,
    id: string,
    identity: readonly (string | number)[],
    stored: unknown,
    expected?: Tenant,
  ): JsonValue {
    if (!isEnvelope(stored)) throw undecryptable(what, id, NOT_SEALED);
    const text = stored[SEALED];
    const known = this.sealer.reopen(text, identity, this.#keyOf);
    if (known && (!expected || tenantName(expected) === known.tenant)) return known.value;
    const form = this.sealer.formOf(text);
    if (!form) throw undecryptable(what, id, DID_NOT_OPEN);
    if (expected && tenantName(expected) !== form.name)
      throw undecryptable(what, id, DID_NOT_OPEN, { tenant: tenantName(expected) });
    const key = this.#keys.get(form.name);
    const value = key && this.sealer.open(key, form, identity, text);
    if (value === undefined) throw undecryptable(what, id, DID_NOT_OPEN, { tenant: form.name });
    return value;
  }

  // ------------------------------------------------------------ messages

  async #sealMessages(messages: Message[]): Promise<Message[]> {
    const tenants = new Map<string, { form: TenantForm; key: KeyObject }>();
    for (const threadId of new Set(messages.map((m) => m.threadId))) {
      const tenant = await this.#threadTenant(threadId);
      tenants.set(threadId, {
        form: this.sealer.form(tenant),
        key: await this.#dataKey(tenant, true),
      });
    }
    return messages.map((m) => {
      const { form, key } = tenants.get(m.threadId)!;
      return { ...m, data: { [SEALED]: this.sealer.seal(key, form, messageIdentity(m), m.data) } };
    });
  }
  async #openMessages(ms: Message[]): Promise<Message[]> {
    // A chain read again opens from the cache: only the rest need their tenants' keys.
    const rest: Message[] = [];
    for (const m of ms) {
      const known = isEnvelope(m.data)
        ? this.sealer.reopen(m.data[SEALED], messageIdentity(m), this.#keyOf)
        : undefined;
      if (known) m.data = known.value;
      else rest.push(m);
    }
    if (rest.length === 0) return ms;
    await this.#keysFor(rest.map((m) => m.data));
    for (const m of rest) m.data = this.#open('message', m.id, messageIdentity(m), m.data);
    return ms;
  }

  async insertMessages(...[messages, jumps]: Parameters<DriverSession['insertMessages']>) {
    return this.s.insertMessages(await this.#sealMessages(messages), jumps);
  }
  async insertMessagesMovingHead(
    ...[messages, ...rest]: Parameters<NonNullable<DriverSession['insertMessagesMovingHead']>>
  ) {
    return this.s.insertMessagesMovingHead!(await this.#sealMessages(messages), ...rest);
  }
  async getMessage(id: string) {
    const m = await this.s.getMessage(id);
    return m && (await this.#openMessages([m]))[0]!;
  }
  async listMessages(threadId: string) {
    return this.#openMessages(await this.s.listMessages(threadId));
  }
  async getChain(headId: string, minDepth: number, maxDepth: number) {
    return this.#openMessages(await this.s.getChain(headId, minDepth, maxDepth));
  }

  // ------------------------------------------------------------ state

  async #sealCommit<C extends StateCommitDraft>(c: C, threadId: string, version: number) {
    const tenant = await this.#threadTenant(threadId);
    const id = [threadId, c.branchId, version];
    return {
      ...c,
      update: (await this.#seal(tenant, ['state.update', ...id], c.update)) as JsonObject,
      snapshot:
        c.snapshot === null
          ? null
          : ((await this.#seal(tenant, ['state.snapshot', ...id], c.snapshot)) as JsonObject),
    };
  }
  async #openCommits(cs: StateCommit[]): Promise<StateCommit[]> {
    await this.#keysFor(cs.flatMap((c) => [c.update, c.snapshot]));
    for (const c of cs) {
      const id = [c.threadId, c.branchId, c.version];
      const label = `${c.branchId}@${c.version}`;
      c.update = this.#open('state commit', label, ['state.update', ...id], c.update) as JsonObject;
      if (c.snapshot !== null)
        c.snapshot = this.#open(
          'state commit',
          label,
          ['state.snapshot', ...id],
          c.snapshot,
        ) as JsonObject;
    }
    return cs;
  }

  async appendStateCommit(draft: StateCommitDraft, expectedVersion: number) {
    const b = await this.s.getBranchById(draft.branchId);
    // No branch: the driver writes nothing and says so.
    if (!b) return null;
    const sealed = await this.#sealCommit(draft, b.threadId, expectedVersion + 1);
    const saved = await this.s.appendStateCommit!(sealed, expectedVersion);
    return saved && { ...saved, update: draft.update, snapshot: draft.snapshot };
  }
  async insertStateCommit(commit: StateCommit) {
    return this.s.insertStateCommit!(
      await this.#sealCommit(commit, commit.threadId, commit.version),
    );
  }
  async getStateCommits(branchId: string, from: number, to: number) {
    return this.#openCommits(await this.s.getStateCommits(branchId, from, to));
  }
  async getLatestStateCommit(...a: Parameters<DriverSession['getLatestStateCommit']>) {
    const c = await this.s.getLatestStateCommit(...a);
    return c && (await this.#openCommits([c]))[0]!;
  }
  async getLatestStateCommits(
    ...a: Parameters<NonNullable<DriverSession['getLatestStateCommits']>>
  ) {
    const cs = await this.s.getLatestStateCommits!(...a);
    await this.#openCommits(cs.filter((c) => c !== null));
    return cs;
  }
  async sweepFacts(...a: Parameters<NonNullable<DriverSession['sweepFacts']>>) {
    const facts = await this.s.sweepFacts!(...a);
    await this.#openMessages(facts.messages);
    return facts;
  }

  // ------------------------------------------------------------ memories

  async #sealMemory(m: Memory): Promise<Memory> {
    const tenant = memoryTenant(m);
    const content = await this.#seal(tenant, ['memory.content', m.id], m.content);
    const stored: Record<string, unknown> = { ...content, text: '' };
    if (m.embedding !== null)
      stored[SEALED_EMBEDDING] = (
        await this.#seal(tenant, ['memory.embedding', m.id], m.embedding)
      )[SEALED];
    // `text` stays empty and `embedding` null: drivers index them for search.
    return {
      ...m,
      content: stored as unknown as MemoryContent,
      metadata: (await this.#seal(tenant, ['memory.metadata', m.id], m.metadata)) as JsonObject,
      embedding: null,
    };
  }
  async #openMemories(ms: Memory[]): Promise<Memory[]> {
    await this.#keysFor(ms.flatMap((m) => [m.content, m.metadata]));
    for (const m of ms) {
      const tenant = memoryTenant(m);
      const {
        text,
        [SEALED_EMBEDDING]: embedding,
        ...sealed
      } = m.content as unknown as Record<string, unknown>;
      if (text !== '' || m.embedding !== null) throw undecryptable('memory', m.id, NOT_SEALED);
      if (embedding !== undefined)
        m.embedding = this.#open(
          'memory',
          m.id,
          ['memory.embedding', m.id],
          typeof embedding === 'string' ? { [SEALED]: embedding } : embedding,
          tenant,
        ) as number[];
      m.content = this.#open(
        'memory',
        m.id,
        ['memory.content', m.id],
        sealed,
        tenant,
      ) as MemoryContent;
      m.metadata = this.#open(
        'memory',
        m.id,
        ['memory.metadata', m.id],
        m.metadata,
        tenant,
      ) as JsonObject;
    }
    return ms;
  }
  #filter(filter: MemoryFilter): void {
    if (filter.metadataPrefix !== undefined) throw sealedRefusal('a metadataPrefix filter');
  }

  async insertMemories(memories: Memory[]) {
    const sealed: Memory[] = [];
    for (const m of memories) sealed.push(await this.#sealMemory(m));
    const stored = await this.s.insertMemories(sealed);
    return stored.map((m, i) => ({
      ...m,
      content: memories[i]!.content,
      metadata: memories[i]!.metadata,
      embedding: memories[i]!.embedding,
    }));
  }
  async replaceMemory(memory: Memory) {
    const stored = await this.s.replaceMemory(await this.#sealMemory(memory));
    return {
      ...stored,
      content: memory.content,
      metadata: memory.metadata,
      embedding: memory.embedding,
    };
  }
  async getMemory(id: string) {
    const m = await this.s.getMemory(id);
    return m && (await this.#openMemories([m]))[0]!;
  }
  async listMemories(...a: Parameters<DriverSession['listMemories']>) {
    this.#filter(a[0]);
    return this.#openMemories(await this.s.listMemories(...a));
  }
  async countMemories(filter: MemoryFilter) {
    this.#filter(filter);
    return this.s.countMemories(filter);
  }
  async scanMemories(after: string | null, limit: number) {
    return this.#openMemories(await this.s.scanMemories(after, limit));
  }
  // The front door searches a sealed store in the process (`searchSealed`) and caches no
  // embeddings: these would read or write an index of plaintext.
  vectorCandidates(): never {
    throw sealedRefusal('vector candidates from the driver');
  }
  keywordCandidates(): never {
    throw sealedRefusal('keyword candidates from the driver');
  }
  putCachedEmbeddings(): never {
    throw sealedRefusal('caching embeddings');
  }

  // ------------------------------------------------------------ session

  async savepoint<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await this.s.savepoint(fn);
    } catch (e) {
      // A data key stored under the savepoint is gone with it.
      this.#keys.clear();
      throw e;
    }
  }
}

const messageIdentity = (m: Message) => ['message', m.threadId, m.id];
