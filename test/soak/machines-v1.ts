/** The soak server's machines before the upgrade (`hercules serve --machines`): soak@1 and chat. */
export { chat, soak } from './machine.ts';
