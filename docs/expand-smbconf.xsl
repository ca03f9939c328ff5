<?xml version="1.0" encoding="UTF-8"?>
<!--
  Turns Samba's man page elements (smbconfoption, smbconfsection) into
  plain DocBook, so that Debian's docbook-xsl can render the page.
-->
<xsl:stylesheet version="1.0"
	xmlns:xsl="http://www.w3.org/1999/XSL/Transform">

<xsl:template match="@*|node()">
	<xsl:copy>
		<xsl:apply-templates select="@*|node()"/>
	</xsl:copy>
</xsl:template>

<xsl:template match="smbconfoption">
	<xsl:choose>
		<xsl:when test="value">
			<literal><xsl:value-of select="name"/> = <xsl:value-of select="value"/></literal>
		</xsl:when>
		<xsl:otherwise>
			<literal><xsl:value-of select="name"/></literal>
		</xsl:otherwise>
	</xsl:choose>
</xsl:template>

<xsl:template match="programlisting/smbconfoption">
	<xsl:text>    </xsl:text>
	<xsl:value-of select="name"/> = <xsl:value-of select="value"/>
</xsl:template>

<xsl:template match="smbconfsection">
	<xsl:value-of select="@name"/>
</xsl:template>

</xsl:stylesheet>
