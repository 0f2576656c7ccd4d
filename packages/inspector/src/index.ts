export { type Inspector, type InspectorOptions, startInspector } from './server.js';
