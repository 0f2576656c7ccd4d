export {
  type Composed,
  type ComposeOptions,
  Composer,
  type ComposerOptions,
  type ComposerStats,
  createComposer,
  type ProviderDiagnostic,
} from './composer.js';
export type {
  ComposeMessage,
  Provider,
  ProviderContext,
  ProviderKeyContext,
  ProviderResult,
} from './provider.js';
export { type RenderTemplateOptions, renderTemplate } from './render-template.js';
