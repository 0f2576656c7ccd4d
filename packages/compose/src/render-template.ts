import { CairnError, checkKeys } from '@cairn/core';

/** Options for {@link renderTemplate}. */
export interface RenderTemplateOptions {
  /** Used for keys missing from `values` (or whose value is undefined). */
  defaults?: Readonly<Record<string, unknown>>;
}

const PLACEHOLDER = /\{\{\s*([^{}\s]+)\s*\}\}/g;

function lookup(values: Readonly<Record<string, unknown>>, key: string): unknown {
  if (Object.hasOwn(values, key)) return values[key];
  // A dotted key reads nested values: {{user.name}} -> values.user.name.
  if (!key.includes('.')) return undefined;
  let current: unknown = values;
  for (const part of key.split('.')) {
    if (typeof current !== 'object' || current === null || !Object.hasOwn(current, part))
      return undefined;
    current = (current as Record<string, unknown>)[part];
  }
  return current;
}

function show(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint')
    return String(value);
  return JSON.stringify(value) ?? String(value);
}

/**
 * Fills `{{key}}` placeholders from `composed.values` (a dotted key such as
 * `{{user.name}}` reads nested values). Strings are inserted as they are, other values
 * as JSON. A key that is neither in `values` nor in `defaults` is an `INVALID_ARGUMENT`
 * error naming every missing key (`details.missing`).
 *
 * @example
 * ```ts
 * const prompt = renderTemplate('{{persona}}\n\nUser said: {{lastMessage}}', composed, {
 *   defaults: { persona: 'You are helpful.' },
 * });
 * ```
 */
export function renderTemplate(
  template: string,
  composed: { readonly values: Readonly<Record<string, unknown>> },
  options: RenderTemplateOptions = {},
): string {
  if (typeof template !== 'string') {
    throw new CairnError('INVALID_ARGUMENT', 'renderTemplate needs a string template');
  }
  const values = composed?.values;
  if (typeof values !== 'object' || values === null) {
    throw new CairnError('INVALID_ARGUMENT', 'renderTemplate needs a composition with values');
  }
  checkKeys(options, 'renderTemplate options', ['defaults']);
  const defaults = options.defaults ?? {};
  const missing: string[] = [];
  const out = template.replace(PLACEHOLDER, (whole, key: string) => {
    let value = lookup(values, key);
    if (value === undefined) value = lookup(defaults, key);
    if (value === undefined) {
      if (!missing.includes(key)) missing.push(key);
      return whole;
    }
    return show(value);
  });
  if (missing.length > 0) {
    throw new CairnError(
      'INVALID_ARGUMENT',
      `template placeholder${missing.length > 1 ? 's' : ''} ${missing.map((k) => `{{${k}}}`).join(', ')} ha${missing.length > 1 ? 've' : 's'} no value and no default`,
      { details: { missing } },
    );
  }
  return out;
}
