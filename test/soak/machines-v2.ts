/** The soak server's machines after the upgrade: soak@2 (which brings soak@1 with it) and chat. */
export { chat, soakV2 } from './machine.ts';
