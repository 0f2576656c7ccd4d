import type { Provider, ProviderContext, ProviderResult } from '../src/index.js';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function msg(id: string) {
  return { id, role: 'user', text: `message ${id}` };
}

/** A provider that counts its calls and records every context it was given. */
export function counting(
  name: string,
  result: ProviderResult | ((ctx: ProviderContext) => ProviderResult | Promise<ProviderResult>),
  extra: Partial<Provider> = {},
): Provider & { calls: ProviderContext[] } {
  const calls: ProviderContext[] = [];
  return {
    name,
    ...extra,
    calls,
    get: async (ctx) => {
      calls.push(ctx);
      return typeof result === 'function' ? result(ctx) : result;
    },
  };
}

/** Resolves only when the signal aborts (a provider that would hang forever). */
export function hangUntilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
  });
}

export function deferred<T = void>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
