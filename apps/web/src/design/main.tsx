import { createRoot } from 'react-dom/client';
createRoot(document.getElementById('root')!).render(<p>Interior design: coming in this change.</p>);
