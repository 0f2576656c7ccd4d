import { CairnError, isCairnError } from '@cairn/core';
import { describe, expect, it } from 'vitest';
import { createComposer, renderTemplate } from '../src/index.js';
import { msg } from './helpers.js';

describe('renderTemplate', () => {
  it("fills placeholders from a composition's values", async () => {
    const composer = createComposer({
      cache: { max: 10 },
      timeoutMs: 1000,
      providers: [
        { name: 'a', position: 1, get: () => ({ values: { name: 'Ada', count: 3 } }) },
        {
          name: 'b',
          position: 2,
          get: () => ({
            values: { name: 'Grace', user: { lang: 'en' }, tags: ['x', 'y'], on: false },
          }),
        },
      ],
    });
    const composed = await composer.compose(msg('m1'));
    expect(
      renderTemplate('Hi {{name}} ({{ count }}), {{user.lang}} {{tags}} {{on}} {{name}}', composed),
    ).toBe('Hi Grace (3), en ["x","y"] false Grace');
  });

  it('names every missing key in a clear INVALID_ARGUMENT error', () => {
    const error = (() => {
      try {
        renderTemplate('{{a}} {{missing}} {{other.path}} {{missing}}', { values: { a: 1 } });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(CairnError);
    expect(isCairnError(error, 'INVALID_ARGUMENT')).toBe(true);
    expect((error as CairnError).message).toContain('{{missing}}');
    expect((error as CairnError).message).toContain('{{other.path}}');
    expect((error as CairnError).details).toEqual({ missing: ['missing', 'other.path'] });
  });

  it('uses a default for a missing key, and values win over defaults', () => {
    const out = renderTemplate(
      '{{persona}} / {{name}} / {{empty}}',
      { values: { name: 'Ada' } },
      {
        defaults: { persona: 'You are helpful.', name: 'nobody', empty: '' },
      },
    );
    expect(out).toBe('You are helpful. / Ada / ');
  });

  it('treats an undefined value as missing and leaves text without placeholders alone', () => {
    expect(() => renderTemplate('{{u}}', { values: { u: undefined } })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }) as Error,
    );
    expect(renderTemplate('no {placeholders} here', { values: {} })).toBe('no {placeholders} here');
    expect(renderTemplate('{{n}}', { values: { n: null } })).toBe('null');
  });
});
