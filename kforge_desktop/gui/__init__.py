"""The desktop app (Qt only). Nothing outside ``gui`` imports it.

Importing the package first applies the binding guard of ``qt_compat`` (see there why).
"""

from .qt_compat import make_none_immortal

make_none_immortal()
