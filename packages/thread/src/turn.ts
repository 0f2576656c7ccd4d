import {
  applyUpdate,
  CairnError,
  checkKeys,
  invalidArgument,
  type JsonObject,
  type StateOf,
  type StateSchema,
  type Turn,
  type TurnStateOf,
  type TurnStep,
  type TurnUpdateOf,
  type UpdateOf,
} from '@cairn/core';
import type { Store } from '@cairn/store';
import { SerialQueue } from './queue.js';

/**
 * One message being processed: its turn-scoped state (reset to the schema's defaults
 * when the turn begins), the timing of its named steps, and its status. Every change is
 * written to the store with `putTurn`, in order.
 *
 * @example
 * ```ts
 * const turn = await thread.beginTurn({ messageId: userMessage.id, source: 'web' });
 * const plan = await turn.step('planning', async () => makePlan());
 * await turn.update({ files: [{ name: 'notes.md' }] });
 * await turn.finish();
 * ```
 */
export class ThreadTurn<S extends StateSchema<any>> {
  #store: Store;
  #schema: S;
  #record: Turn;
  #writes = new SerialQueue();
  #onFinish: () => Promise<void>;

  /** @internal — use `thread.beginTurn`. */
  constructor(store: Store, schema: S, record: Turn, onFinish: () => Promise<void>) {
    this.#store = store;
    this.#schema = schema;
    this.#record = record;
    this.#onFinish = onFinish;
  }

  get id(): string {
    return this.#record.id;
  }

  get messageId(): string | null {
    return this.#record.messageId;
  }

  get status(): Turn['status'] {
    return this.#record.status;
  }

  /** The turn-scoped fields of the state. */
  get state(): TurnStateOf<S> {
    return this.#record.state as TurnStateOf<S>;
  }

  get steps(): readonly TurnStep[] {
    return this.#record.steps;
  }

  /** A copy of the stored record. */
  get record(): Turn {
    return structuredClone(this.#record);
  }

  /** Runs `fn` as the named step, recording its start, end and error (rethrown). */
  async step<T>(name: string, fn: () => T | Promise<T>): Promise<T> {
    this.#assertRunning();
    if (typeof name !== 'string' || name.length === 0) {
      throw new CairnError('INVALID_ARGUMENT', 'a step needs a non-empty name');
    }
    const step: TurnStep = { name, start: Date.now(), end: null, error: null };
    this.#record = { ...this.#record, steps: [...this.#record.steps, step] };
    const index = this.#record.steps.length - 1;
    await this.#persist();
    const done = (error: string | null) => {
      const steps = [...this.#record.steps];
      steps[index] = { ...step, end: Date.now(), error };
      this.#record = { ...this.#record, steps };
      return this.#persist();
    };
    let result: T;
    try {
      result = await fn();
    } catch (e) {
      await done(e instanceof Error ? e.message : String(e));
      throw e;
    }
    await done(null);
    return result;
  }

  /** Merges an update into the turn-scoped fields through their reducers. */
  async update(update: TurnUpdateOf<S>): Promise<TurnStateOf<S>> {
    this.#assertRunning();
    const { state, changed } = applyUpdate(
      this.#schema,
      this.#record.state as StateOf<S>,
      update as UpdateOf<S>,
      {
        scope: 'turn',
      },
    );
    if (changed.length > 0) {
      this.#record = { ...this.#record, state: state as JsonObject };
      await this.#persist();
    }
    return this.state;
  }

  /** Ends the turn (`failed` when an error is given) and purges turns past retention. */
  async finish(options: { status?: 'finished' | 'failed'; error?: string } = {}): Promise<Turn> {
    this.#assertRunning();
    checkKeys(options, 'finish options', ['status', 'error']);
    if (
      options.status !== undefined &&
      options.status !== 'finished' &&
      options.status !== 'failed'
    )
      throw invalidArgument(
        `status must be 'finished' or 'failed', got ${JSON.stringify(options.status)}`,
      );
    const status = options.status ?? (options.error === undefined ? 'finished' : 'failed');
    const steps =
      options.error === undefined
        ? this.#record.steps
        : [
            ...this.#record.steps,
            { name: 'error', start: Date.now(), end: Date.now(), error: options.error },
          ];
    this.#record = { ...this.#record, status, steps, finishedAt: Date.now() };
    await this.#persist();
    await this.#onFinish();
    return this.record;
  }

  #assertRunning(): void {
    if (this.#record.status !== 'running') {
      throw new CairnError('CONFLICT', `turn ${this.#record.id} is already ${this.#record.status}`);
    }
  }

  async #persist(): Promise<void> {
    await this.#writes.run(() => this.#store.putTurn(this.#record));
  }
}
