package fallback

import _ "modernc.org/sqlite" // the embedded default database driver
