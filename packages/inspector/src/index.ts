export { type Inspector, type InspectorOptions, isLoopback, startInspector } from './server.js';
