export type {
  ComposeMessage,
  Provider,
  ProviderContext,
  ProviderKeyContext,
  ProviderResult,
} from '@cairn/core';
export {
  COMPOSER_DEFAULTS,
  type Composed,
  type ComposeOptions,
  Composer,
  type ComposerOptions,
  type ComposerStats,
  createComposer,
  type ForgetSource,
  type ProviderDiagnostic,
} from './composer.js';
export { type RenderTemplateOptions, renderTemplate } from './render-template.js';
