import { CairnError, type ComposeMessage, checkKeys, type Provider } from '@cairn/core';

/** The largest delay setTimeout honours; longer ones fire at once. */
const MAX_TIMER_MS = 2_147_483_647;

export function checkBudget(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > MAX_TIMER_MS) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `${what} must be a positive number of milliseconds up to ${MAX_TIMER_MS}, got ${String(value)}`,
      {
        details: { value },
      },
    );
  }
  return value;
}

/** Checks a provider's shape before it is registered. */
export function checkProvider(
  provider: unknown,
): asserts provider is Provider<ComposeMessage, unknown> {
  if (typeof provider !== 'object' || provider === null) {
    throw new CairnError('INVALID_ARGUMENT', 'a provider must be an object');
  }
  const p = provider as Partial<Record<keyof Provider, unknown>>;
  if (typeof p.name !== 'string' || p.name.length === 0) {
    throw new CairnError('INVALID_ARGUMENT', 'a provider needs a non-empty string name', {
      details: { name: p.name },
    });
  }
  const name = p.name;
  const fail = (message: string): never => {
    throw new CairnError('INVALID_ARGUMENT', `provider "${name}": ${message}`, {
      details: { provider: name },
    });
  };
  if (typeof p.get !== 'function') fail('get must be a function');
  if (
    p.position !== undefined &&
    (typeof p.position !== 'number' || !Number.isFinite(p.position))
  ) {
    fail('position must be a finite number');
  }
  if (p.timeoutMs !== undefined) checkBudget(p.timeoutMs, `provider "${name}": timeoutMs`);
  if (p.cache !== undefined) {
    if (typeof p.cache !== 'object' || p.cache === null)
      fail('cache must be an object { ttlMs, key? }');
    checkKeys(p.cache, `provider "${name}": cache`, ['ttlMs', 'key']);
    const c = p.cache as { ttlMs?: unknown; key?: unknown };
    checkBudget(c.ttlMs, `provider "${name}": cache.ttlMs`);
    if (c.key !== undefined && typeof c.key !== 'function') fail('cache.key must be a function');
  }
}
