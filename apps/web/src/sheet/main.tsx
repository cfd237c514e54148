import { createRoot } from 'react-dom/client';
createRoot(document.getElementById('root')!).render(<p>Spreadsheet: coming in this change.</p>);
