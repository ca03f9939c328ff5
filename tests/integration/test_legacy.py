"""
fastcase:legacy charset through a real smbd: a charset iconv does not know
refuses the connection and names the parameter; a legacy name hidden by a
UTF-8 name that folds equal is logged. (The listing, open and rename of
legacy names are in test_engine.LegacyCharset.)
"""

import os
import re

from samba import NTSTATUSError
from samba import ntstatus

from harness import SmbdTestCase, FASTCASE


class UnknownLegacyCharset(SmbdTestCase):
    shares = {
        'latin': dict(FASTCASE, **{'fastcase:legacy charset': 'ISO-8859-1'}),
        'nosuch': dict(FASTCASE, **{
            'fastcase:legacy charset': 'NO-SUCH-CHARSET'}),
    }

    def test_known_charset_connects(self):
        self.assertIsInstance(self.conn('latin').list(''), list)

    def test_unknown_charset_refuses_the_connection(self):
        mark = self.log_mark()
        with self.assertRaises(NTSTATUSError) as cm:
            self.conn('nosuch')
        # the session setup worked (the other share takes the same
        # credentials): the tree connect was refused
        self.assertNotEqual(cm.exception.args[0],
                            ntstatus.NT_STATUS_LOGON_FAILURE)
        # refused by the parameter parser, which says why, not by an
        # engine that failed to start
        line = (r'share \[nosuch\]: invalid value "NO-SUCH-CHARSET" for '
                r'parameter "fastcase:legacy charset": unknown to iconv')
        log = self.wait_for_log(line, since=mark)
        self.assertIsNotNone(log, 'smbd log does not name the parameter:'
                             '\n' + self.log_text(since=mark))


class HiddenLegacyName(SmbdTestCase):
    """A decoded legacy name that folds equal to a UTF-8 name in the same
    directory is left out of listings, and the log says so. Where the
    module picks between such names (fold = unicode), it names the one
    that hid the legacy name (DBG_NOTICE, level 3); with smbd's own rule
    it leaves the choice to smbd and logs the names that fold equal."""

    shares = {
        'uni': dict(FASTCASE, **{'fastcase:legacy charset': 'ISO-8859-1',
                                 'fastcase:fold': 'unicode'}),
        'win': dict(FASTCASE, **{'fastcase:legacy charset': 'ISO-8859-1'}),
    }
    debuglevel = 3

    HIDDEN = (r'share \[%s\]: legacy name "(.*?)" is hidden by "(.*?)", '
              r'which folds equal')

    def listing(self, share):
        """café.txt in ISO-8859-1 beside CAFÉ.txt in UTF-8, and a legacy
        name without a UTF-8 twin: the names listed."""
        d = self.fresh_dir(share)
        for name, data in ((b'caf\xe9.txt', b'latin'),
                           ('CAFÉ.txt'.encode(), b'utf8'),
                           (b'na\xefve.txt', b'alone')):
            with open(os.path.join(self.local(share, d).encode(), name),
                      'wb') as f:
                f.write(data)
        names = [e['name'] for e in self.conn(share).list(d)]
        self.assertIn('CAFÉ.txt', names)
        self.assertIn('naïve.txt', names)
        self.assertNotIn('café.txt', names)
        return d

    def test_hidden_legacy_name_is_logged(self):
        mark = self.log_mark()
        self.listing('uni')
        pattern = self.HIDDEN % 'uni'
        log = self.wait_for_log(pattern, since=mark)
        self.assertIsNotNone(log, 'no "hidden" line in the log:\n' +
                             self.log_text(since=mark)[-3000:])
        # only the name that has a UTF-8 twin
        self.assertEqual(sorted(set(re.findall(pattern, log))),
                         [('café.txt', 'CAFÉ.txt')])

    def test_hidden_under_smbds_rule_is_logged(self):
        mark = self.log_mark()
        d = self.listing('win')
        log = self.wait_for_log(r'share \[win\]: 2 names in directory '
                                r'\S*/%s fold equal to "café.txt"' % d,
                                since=mark)
        self.assertIsNotNone(log, self.log_text(since=mark)[-3000:])
